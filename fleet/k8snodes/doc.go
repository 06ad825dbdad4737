// Package k8snodes checks a fleet's node registrations against the
// orchestrator: on Kubernetes, a router watches the EndpointSlices of
// the node agents' Service and takes a node for live only while its pod
// is one of the Service's endpoints (docs/fleet.md "Nodes on
// Kubernetes").
//
// The heartbeats in the fleet's registry still carry what only a node
// knows (its URL, free capacity, whether it drains). The endpoints add
// what only the orchestrator knows: a pod being deleted is marked
// terminating at once, a pod that is gone leaves the slice before its
// heartbeat expires, and a registration whose name and address match no
// pod of the Service (written by anything else that can reach Redis) is
// never routed to.
//
// It speaks the API server's list and watch protocol over plain HTTPS
// with the pod's service-account token; no client library is needed for
// one resource.
package k8snodes
