package daemon

import (
	"crypto/sha256"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/kernpool/kernpool/pool/api"
)

// Defaults of the network listener's bounds.
const (
	// DefaultListenMaxConns caps the listener's concurrent connections.
	DefaultListenMaxConns = 256
	// DefaultListenMaxHeaderBytes caps one request's header block.
	DefaultListenMaxHeaderBytes = 64 << 10
	// DefaultListenHeaderTimeout bounds a TLS handshake and the request
	// headers that follow it.
	DefaultListenHeaderTimeout = 10 * time.Second
	// DefaultListenIdleTimeout closes kept-alive connections left idle.
	DefaultListenIdleTimeout = 2 * time.Minute
)

// NetworkConfig configures the API's network listener (docs/fleet.md):
// the same API as the Unix socket, over TLS, for callers that
// authenticate with a bearer token or a client certificate.
type NetworkConfig struct {
	// Listen is the TCP address ("10.0.0.5:8443"); empty: no listener.
	// Without TLSCert it must be a loopback address.
	Listen string
	// TLSCert and TLSKey are the server's certificate chain and key (PEM).
	TLSCert, TLSKey string
	// TLSClientCA, when set, verifies client certificates (PEM bundle); a
	// verified certificate authenticates as its ClientCerts entry.
	TLSClientCA string
	// Tokens are the accepted bearer tokens (their SHA-256 only).
	Tokens []Credential
	// ClientCerts are the accepted client certificates, by subject CN.
	ClientCerts []Credential
	// MaxConns caps concurrent connections (0: DefaultListenMaxConns).
	MaxConns int
	// MaxHeaderBytes caps a request's headers (0: DefaultListenMaxHeaderBytes).
	MaxHeaderBytes int
	// HeaderTimeout bounds a TLS handshake plus request headers.
	HeaderTimeout time.Duration
	// IdleTimeout closes kept-alive connections left idle.
	IdleTimeout time.Duration
}

// Credential is one token or client certificate and what it may do.
type Credential struct {
	// Name is the token's name, or the client certificate's subject CN.
	Name string
	// SHA256 is a token's digest in hex (tokens only; `kernpool token`).
	SHA256 string
	// Admin may act for every owner, drain the node and read /metrics.
	Admin bool
	// Owners it may act for, exactly.
	Owners []string
	// OwnerPrefixes it may act for ("acme/" allows "acme/alice").
	OwnerPrefixes []string
}

func defaultNetwork() NetworkConfig {
	return NetworkConfig{MaxConns: DefaultListenMaxConns, MaxHeaderBytes: DefaultListenMaxHeaderBytes,
		HeaderTimeout: DefaultListenHeaderTimeout, IdleTimeout: DefaultListenIdleTimeout}
}

// validate checks the listener's settings: TLS material for anything but
// loopback, at least one credential, well-formed tokens.
func (n *NetworkConfig) validate() error {
	if n.MaxConns < 1 || n.MaxHeaderBytes < 1024 || n.HeaderTimeout <= 0 || n.IdleTimeout <= 0 {
		return fmt.Errorf("%w: listen_max_conns must be at least 1, listen_max_header_bytes at least 1KiB, listen_header_timeout and listen_idle_timeout positive", ErrConfig)
	}
	if (n.TLSCert == "") != (n.TLSKey == "") {
		return fmt.Errorf("%w: tls_cert and tls_key go together", ErrConfig)
	}
	if n.TLSClientCA != "" && n.TLSCert == "" {
		return fmt.Errorf("%w: tls_client_ca needs tls_cert and tls_key (client certificates are verified in a TLS handshake)", ErrConfig)
	}
	if len(n.ClientCerts) > 0 && n.TLSClientCA == "" {
		return fmt.Errorf("%w: client_cert blocks need tls_client_ca to verify the certificates against", ErrConfig)
	}
	if _, err := n.credentials(); err != nil {
		return err
	}
	if n.Listen == "" {
		return nil
	}
	host, _, err := net.SplitHostPort(n.Listen)
	if err != nil {
		return fmt.Errorf("%w: listen %q: %v", ErrConfig, n.Listen, err)
	}
	if n.TLSCert == "" && !loopbackHost(host) {
		return fmt.Errorf("%w: listen %q is not a loopback address: serving the API beyond this host needs tls_cert and tls_key (or listen on 127.0.0.1 or [::1])", ErrConfig, n.Listen)
	}
	if len(n.Tokens) == 0 && len(n.ClientCerts) == 0 {
		return fmt.Errorf("%w: listen needs at least one token or client_cert block: a TCP port is open to every user of the host, the Unix socket to its group only", ErrConfig)
	}
	return nil
}

// loopbackHost reports whether host names this machine only: "localhost"
// or a loopback IP ("" and "0.0.0.0" are every interface).
func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// credentials builds the listener's accepted credentials.
func (n *NetworkConfig) credentials() (*api.Credentials, error) {
	c := &api.Credentials{Tokens: map[[sha256.Size]byte]*api.Principal{}, Certs: map[string]*api.Principal{}}
	for _, t := range n.Tokens {
		p, err := principal("token", t)
		if err != nil {
			return nil, err
		}
		d, err := api.ParseTokenDigest(t.SHA256)
		if err != nil {
			return nil, fmt.Errorf("%w: token %q: sha256: %v", ErrConfig, t.Name, err)
		}
		if c.Tokens[d] != nil {
			return nil, fmt.Errorf("%w: token %q has the digest of token %q", ErrConfig, t.Name, c.Tokens[d].Name)
		}
		c.Tokens[d] = p
	}
	for _, cc := range n.ClientCerts {
		p, err := principal("client_cert", cc)
		if err != nil {
			return nil, err
		}
		if c.Certs[cc.Name] != nil {
			return nil, fmt.Errorf("%w: client_cert %q is defined twice", ErrConfig, cc.Name)
		}
		c.Certs[cc.Name] = p
	}
	return c, nil
}

// principal checks one credential's scope: admin, or some owners.
func principal(kind string, c Credential) (*api.Principal, error) {
	if c.Name == "" {
		return nil, fmt.Errorf("%w: a %s block needs a name", ErrConfig, kind)
	}
	scoped := len(c.Owners) > 0 || len(c.OwnerPrefixes) > 0
	if c.Admin == scoped {
		return nil, fmt.Errorf("%w: %s %q: set admin = true or owners / owner_prefixes, not both and not neither", ErrConfig, kind, c.Name)
	}
	for _, pre := range c.OwnerPrefixes {
		if strings.TrimSpace(pre) == "" {
			return nil, fmt.Errorf("%w: %s %q: an empty owner prefix would allow every owner (use admin = true)", ErrConfig, kind, c.Name)
		}
	}
	return &api.Principal{Name: kind + " " + c.Name, Admin: c.Admin, Owners: c.Owners, OwnerPrefixes: c.OwnerPrefixes}, nil
}
