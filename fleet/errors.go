package fleet

import "errors"

var (
	// ErrNoNode: no live, non-draining node can take an owner.
	ErrNoNode = errors.New("no live node that is not draining")
	// ErrRegistry: the registry (Redis) failed or answered garbage.
	ErrRegistry = errors.New("fleet registry")
	// ErrBadNode: a node's registration is malformed.
	ErrBadNode = errors.New("malformed node registration")
)
