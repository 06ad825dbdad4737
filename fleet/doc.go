// Package fleet is kernpool beyond one host (docs/fleet.md): a router
// that serves the node API in front of any number of nodes, placing
// each owner on one node and forwarding its requests there.
//
// It is built as ports and adapters: Registry is the port the owner
// records and the node heartbeats are kept behind (fleet/redisreg
// implements it on Redis); Router is the stateless HTTP front; Place
// chooses a node by rendezvous hashing weighted by free capacity;
// Heartbeat publishes a node. cmd/kernpool and pool/daemon wire them.
package fleet
