package k8snodes

import "errors"

var (
	// ErrConfig: the in-cluster settings are missing or unreadable.
	ErrConfig = errors.New("kubernetes node discovery config")
	// ErrAPI: the API server refused a list or watch, or answered garbage.
	ErrAPI = errors.New("kubernetes API")
	// ErrNotSynced: the first listing of the endpoints has not succeeded.
	ErrNotSynced = errors.New("kubernetes endpoints not listed yet")
)
