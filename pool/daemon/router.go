package daemon

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kernpool/kernpool/fleet"
	"github.com/kernpool/kernpool/fleet/k8snodes"
	"github.com/kernpool/kernpool/fleet/redisreg"
	"github.com/kernpool/kernpool/pool/api"
)

// Router is `kernpool router`: the fleet's stateless front (docs/fleet.md)
// on the node's own network listener code and credentials (listen,
// tls_*, token and client_cert blocks, the listen_* bounds).
type Router struct {
	cfg *Config
	log hclog.Logger
	net *netAuth
	reg *redisreg.Registry
	k8s *k8snodes.Members // nil: the heartbeats alone say which nodes are live
	h   *fleet.Router

	mu  sync.Mutex
	srv *http.Server
}

// NewRouter builds a router from cfg: it needs listen and fleet_redis,
// reads the credentials and TLS files, and reaches the registry.
func NewRouter(ctx context.Context, cfg *Config, version string, log hclog.Logger) (*Router, error) {
	c := *cfg
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.Network.Listen == "" || c.Fleet.Redis == "" {
		return nil, fmt.Errorf("%w: a router needs listen and fleet_redis", ErrConfig)
	}
	a, err := loadNetAuth(&c.Network)
	if err != nil {
		return nil, err
	}
	rt, err := nodeTransport(&c.Fleet)
	if err != nil {
		return nil, err
	}
	var token string
	if c.Fleet.NodeTokenFile != "" {
		b, err := os.ReadFile(c.Fleet.NodeTokenFile)
		if err != nil {
			return nil, fmt.Errorf("%w: fleet_node_token_file: %v", ErrConfig, err)
		}
		if token = strings.TrimSpace(string(b)); token == "" {
			return nil, fmt.Errorf("%w: fleet_node_token_file %s is empty", ErrConfig, c.Fleet.NodeTokenFile)
		}
	}
	var kc *k8snodes.Config
	if c.Fleet.KubernetesService != "" {
		in, err := k8snodes.InCluster(c.Fleet.KubernetesService, c.Fleet.KubernetesNamespace)
		if err != nil {
			return nil, fmt.Errorf("%w: fleet_kubernetes_service: %v", ErrConfig, err)
		}
		in.Logger = log
		kc = &in
	}
	reg, err := redisreg.Open(ctx, c.Fleet.Redis, os.Getenv(fleetPasswordEnv))
	if err != nil {
		return nil, err
	}
	var nodes fleet.Registry = reg
	var members *k8snodes.Members
	if kc != nil {
		if members, err = startMembers(ctx, *kc); err != nil {
			_ = reg.Close()
			return nil, err
		}
		nodes = endpointNodes{reg, members}
	}
	h := fleet.NewRouter(fleet.RouterConfig{Registry: nodes, Transport: rt, NodeToken: token, Version: version,
		NodesTTL: min(fleet.DefaultNodesTTL, c.Fleet.Heartbeat), Logger: log})
	return &Router{cfg: &c, log: log, net: a, reg: reg, k8s: members, h: h}, nil
}

// membersStart bounds the first listing of the node Service's endpoints.
const membersStart = 30 * time.Second

// startMembers watches the node Service's EndpointSlices from inside the
// router's pod (fleet_kubernetes_service): a router that cannot list
// them does not start.
func startMembers(ctx context.Context, kc k8snodes.Config) (*k8snodes.Members, error) {
	ctx, cancel := context.WithTimeout(ctx, membersStart)
	defer cancel()
	return k8snodes.Start(ctx, kc)
}

// endpointNodes is the fleet's registry whose live nodes are those the
// node Service's endpoints back (fleet/k8snodes); owner records and the
// owner watch are Redis's as they are.
type endpointNodes struct {
	*redisreg.Registry
	m *k8snodes.Members
}

func (e endpointNodes) Nodes(ctx context.Context) ([]fleet.Node, error) {
	ns, err := e.Registry.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	return e.m.Filter(ns), nil
}

// nodeTransport reaches the nodes: TLS verified against fleet_node_ca
// (or the system's roots), HTTP/1.1 as the nodes speak it, idle
// connections kept for the warm path.
func nodeTransport(f *FleetConfig) (*http.Transport, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.NodeCA != "" {
		roots, err := loadCertPool("fleet_node_ca", f.NodeCA)
		if err != nil {
			return nil, err
		}
		tc.RootCAs = roots
	}
	return &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:     tc,
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
	}, nil
}

// Listen opens the router's listener (as a node's: listen_max_conns,
// TLS when tls_cert is set).
func (r *Router) Listen() (net.Listener, error) { return listenNetwork(&r.cfg.Network, r.net) }

// Serve serves the fleet on ln until Shutdown, every request
// authenticated as on a node.
func (r *Router) Serve(ln net.Listener) error {
	r.mu.Lock()
	if r.srv != nil {
		r.mu.Unlock()
		_ = ln.Close()
		return errors.New("router: already serving")
	}
	r.srv = networkServer(&r.cfg.Network, api.Authenticate(r.net.creds.Load, r.h), r.log)
	srv := r.srv
	r.mu.Unlock()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Reload rereads the credentials and TLS files (SIGHUP).
func (r *Router) Reload(next *Config) error {
	if err := next.Validate(); err != nil {
		return err
	}
	if next.Fleet != r.cfg.Fleet {
		return fmt.Errorf("%w: a reload cannot change the router's fleet_* keys (restart it)", ErrConfig)
	}
	return r.net.load(&next.Network)
}

// Shutdown stops serving (requests in flight may finish until ctx ends)
// and closes the registry.
func (r *Router) Shutdown(ctx context.Context) error {
	r.mu.Lock()
	srv := r.srv
	r.mu.Unlock()
	var err error
	if srv != nil {
		if err = srv.Shutdown(ctx); err != nil {
			_ = srv.Close()
		}
	}
	if r.k8s != nil {
		r.k8s.Stop()
	}
	_ = r.reg.Close()
	return err
}
