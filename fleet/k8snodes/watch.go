package k8snodes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/kernpool/kernpool/fleet"
)

const (
	// maxList bounds a listing's body; maxEvent one watch event's.
	maxList  = 64 << 20
	maxEvent = 8 << 20
	// watchSeconds is how long the API server keeps one watch open.
	watchSeconds = 290
	// Backoff between failed list or watch attempts.
	minBackoff = 100 * time.Millisecond
	maxBackoff = 5 * time.Second
)

// errGone: the watch's resource version is too old; list again.
var errGone = errors.New("resource version gone")

// Members is the live membership of the node Service, kept by a list and
// a watch of its EndpointSlices. Once listed it is kept through API
// server outages (the last membership holds while the watch
// reconnects), as an informer's cache is.
type Members struct {
	cfg Config
	hc  *http.Client
	svc service

	mu      sync.RWMutex
	slices  map[string][]endpoint
	lastErr error

	first     chan struct{}
	firstOnce sync.Once
	cancel    context.CancelFunc
	done      chan struct{}
}

// Start lists the Service's endpoints and keeps watching them. It
// returns once the first listing succeeded, or an error when ctx ends
// before it did: a router configured for the orchestrator's endpoints
// does not serve without them.
func Start(ctx context.Context, cfg Config) (*Members, error) {
	hc, err := cfg.client()
	if err != nil {
		return nil, err
	}
	run, cancel := context.WithCancel(context.Background())
	m := &Members{cfg: cfg, hc: hc, svc: service{cfg.Service, cfg.Namespace}, slices: map[string][]endpoint{},
		first: make(chan struct{}), cancel: cancel, done: make(chan struct{})}
	go m.run(run)
	select {
	case <-m.first:
		return m, nil
	case <-ctx.Done():
		m.Stop()
		m.mu.RLock()
		defer m.mu.RUnlock()
		return nil, fmt.Errorf("%w: service %s/%s: %v (last error: %v)", ErrNotSynced, cfg.Namespace, cfg.Service, ctx.Err(), m.lastErr)
	}
}

// Stop ends the watch.
func (m *Members) Stop() {
	m.cancel()
	<-m.done
}

// Filter keeps the registrations a pod of the Service backs, marking
// those whose pods all terminate as draining.
func (m *Members) Filter(ns []fleet.Node) []fleet.Node {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var eps []endpoint
	for _, s := range m.slices {
		eps = append(eps, s...)
	}
	return filter(ns, eps, m.svc)
}

func (m *Members) run(ctx context.Context) {
	defer close(m.done)
	backoff := minBackoff
	for {
		rv, err := m.list(ctx)
		for err == nil {
			backoff = minBackoff
			rv, err = m.watch(ctx, rv)
		}
		if ctx.Err() != nil {
			return
		}
		m.mu.Lock()
		changed := m.lastErr == nil || m.lastErr.Error() != err.Error()
		m.lastErr = err
		m.mu.Unlock()
		if errors.Is(err, errGone) {
			continue
		}
		if changed {
			m.cfg.Logger.Warn("kubernetes endpoints: list or watch failed, keeping the last membership", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// path is the slices' collection URL with query q.
func (m *Members) path(q url.Values) string {
	q.Set("labelSelector", "kubernetes.io/service-name="+m.svc.name)
	return m.cfg.Server + "/apis/discovery.k8s.io/v1/namespaces/" + m.svc.namespace + "/endpointslices?" + q.Encode()
}

func (m *Members) get(ctx context.Context, u string) (*http.Response, error) {
	tok, err := m.cfg.token()
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Accept", "application/json")
	resp, err := m.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrAPI, err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		_ = resp.Body.Close()
		return nil, fmt.Errorf("%w: %s: %s", ErrAPI, resp.Status, b)
	}
	return resp, nil
}

// list reads every slice of the Service (following continue tokens),
// replaces the membership with them and returns the list's resource
// version for the watch.
func (m *Members) list(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	slices := map[string][]endpoint{}
	q := url.Values{"limit": {"500"}}
	for {
		resp, err := m.get(ctx, m.path(q))
		if err != nil {
			return "", err
		}
		var l struct {
			Metadata struct {
				ResourceVersion string `json:"resourceVersion"`
				Continue        string `json:"continue"`
			} `json:"metadata"`
			Items []endpointSlice `json:"items"`
		}
		err = json.NewDecoder(io.LimitReader(resp.Body, maxList)).Decode(&l)
		_ = resp.Body.Close()
		if err != nil {
			return "", fmt.Errorf("%w: list endpointslices: %v", ErrAPI, err)
		}
		for _, s := range l.Items {
			slices[s.Metadata.Name] = s.Endpoints
		}
		if l.Metadata.Continue == "" {
			m.mu.Lock()
			m.slices, m.lastErr = slices, nil
			m.mu.Unlock()
			m.firstOnce.Do(func() { close(m.first) })
			return l.Metadata.ResourceVersion, nil
		}
		q.Set("continue", l.Metadata.Continue)
	}
}
