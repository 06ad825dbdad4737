// Package redisreg keeps a fleet's registry (fleet.Registry) in Redis,
// through github.com/redis/go-redis/v9.
//
// Keys (under a prefix, "kernpool:" by default):
//
//	node:<name>   a node's registration (JSON), with the heartbeat's TTL
//	nodes         the set of names ever registered (pruned as they expire)
//	owner:<owner> an owner's record: hash {node, gen, state}
//	gen           the fleet-wide generation counter (INCR)
//
// Place is one Lua script, so two routers never both place an owner:
// the second sees the generation the first wrote and takes its record.
package redisreg
