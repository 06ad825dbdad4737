package fleet

import (
	"hash/fnv"
	"math"
)

// Place chooses the node for owner among nodes by rendezvous (highest
// random weight) hashing weighted by free capacity: each live,
// non-draining node not in skip scores weight / -ln(u), where u in
// (0, 1) hashes (owner, node name) and weight is its free slots plus
// one (a full node still takes owners: it evicts idle kernels). An
// owner keeps its choice while the node set stays; a node that joins
// or leaves moves only the owners it wins or held, in proportion to
// its weight. ok is false when no node qualifies.
func Place(owner string, nodes []Node, skip map[string]bool) (Node, bool) {
	var best Node
	bestScore, found := math.Inf(-1), false
	for _, n := range nodes {
		if n.Draining || skip[n.Name] {
			continue
		}
		s := float64(n.Free+1) / -math.Log(unit(owner, n.Name))
		if !found || s > bestScore || s == bestScore && n.Name < best.Name {
			best, bestScore, found = n, s, true
		}
	}
	return best, found
}

// unit hashes (owner, node) onto (0, 1).
func unit(owner, node string) float64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(owner))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(node))
	// 53 bits of the hash, offset by a half so that neither 0 nor 1 occurs.
	return (float64(mix(h.Sum64())>>11) + 0.5) / (1 << 53)
}

// mix spreads FNV's bits (its low bits are weak for similar inputs).
func mix(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}
