package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"

	"github.com/kernpool/kernpool/pool"
)

// Principal is who a request acts as, and for which owners. A request on
// the Unix socket acts as the local admin (the socket's 0660 mode is its
// authentication); a request on the network listener as the token or
// client certificate it presented.
type Principal struct {
	// Name is the token's or client certificate's name in the config (logs).
	Name string
	// Admin may act for every owner and use the node's own endpoints
	// (drain, metrics, spares).
	Admin bool
	// Owners are the owners it may act for, exactly.
	Owners []string
	// OwnerPrefixes are the owner prefixes it may act for ("acme/" allows
	// "acme/alice"); an empty prefix is refused by the config.
	OwnerPrefixes []string
}

// localAdmin is the principal of every request on the Unix socket.
var localAdmin = &Principal{Name: "unix-socket", Admin: true}

// Allows reports whether p may act for owner ("" is pool.DefaultOwner).
func (p *Principal) Allows(owner string) bool {
	if p == nil {
		return false
	}
	if p.Admin {
		return true
	}
	if owner == "" {
		owner = pool.DefaultOwner
	}
	for _, o := range p.Owners {
		if o == owner {
			return true
		}
	}
	for _, pre := range p.OwnerPrefixes {
		if strings.HasPrefix(owner, pre) {
			return true
		}
	}
	return false
}

// Credentials are what the network listener accepts. Tokens are kept by
// the SHA-256 of the token, never the token: the config holds only the
// digest. A plain digest, not a password KDF: a token is a random secret
// of at least 128 bits (`kernpool token` makes 256), so a leaked digest
// cannot be reversed by guessing, and hashing a presented token costs the
// daemon a microsecond rather than a KDF's tens of milliseconds that any
// client could make it spend per request.
type Credentials struct {
	// Tokens maps the SHA-256 of a bearer token to its principal.
	Tokens map[[sha256.Size]byte]*Principal
	// Certs maps a verified client certificate's subject common name to
	// its principal (the listener's TLS config verifies the chain
	// against the configured CA).
	Certs map[string]*Principal
}

// TokenDigest returns the SHA-256 of token, as the config stores it (hex).
func TokenDigest(token string) string {
	d := sha256.Sum256([]byte(token))
	return hex.EncodeToString(d[:])
}

// ParseTokenDigest reads a token's SHA-256 digest in hex (64 digits).
func ParseTokenDigest(s string) ([sha256.Size]byte, error) {
	var d [sha256.Size]byte
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != sha256.Size {
		return d, fmt.Errorf("%q is not a SHA-256 digest in hex (64 digits)", s)
	}
	copy(d[:], b)
	return d, nil
}

// authenticate finds the principal of a network request: its bearer
// token when it sends one (a wrong token is refused even with a good
// certificate), else its verified client certificate.
func (c *Credentials) authenticate(r *http.Request) (*Principal, string) {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, tok, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
			return nil, "the Authorization header must be \"Bearer TOKEN\""
		}
		// A map lookup by digest: its timing depends on the digest, which
		// tells a guesser nothing about any configured token.
		if p := c.Tokens[sha256.Sum256([]byte(tok))]; p != nil {
			return p, ""
		}
		return nil, "the bearer token is not valid"
	}
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 {
		cn := r.TLS.VerifiedChains[0][0].Subject.CommonName
		if p := c.Certs[cn]; p != nil {
			return p, ""
		}
		return nil, "the client certificate is not one this node accepts"
	}
	return nil, "authentication required: a bearer token or a client certificate"
}

type principalKey struct{}

func withPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// principalOf is the request's principal; nil (allowed nothing) if none
// was set, so a route reached without authentication fails closed.
func principalOf(r *http.Request) *Principal {
	p, _ := r.Context().Value(principalKey{}).(*Principal)
	return p
}

// open lists the endpoints a network client may call without
// credentials: an orchestrator's readiness probe (it tells only the
// node's state).
var open = map[string]bool{"/v1/ready": true}

// NetworkHandler is the API as the network listener serves it: every
// request but the readiness probe authenticates (401 unauthorized
// otherwise) and acts only for its principal's owners (403 forbidden for
// another owner; listings are filtered, and a kernel or tool call of
// another owner is not found).
// creds returns the current credentials (a reload may swap them).
func (s *Server) NetworkHandler(creds func() *Credentials) http.Handler {
	return Authenticate(creds, http.HandlerFunc(s.dispatch))
}

// Authenticate is the network listener's authentication in front of
// next (the node's API, or a fleet's router, which serves the same API
// under the same credentials): it answers 401 unauthorized to a request
// without valid credentials (but GET /v1/ready), and hands next the
// request with its principal (PrincipalOf).
func Authenticate(creds func() *Credentials, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := creds()
		if open[r.URL.Path] {
			next.ServeHTTP(w, r.WithContext(withPrincipal(r.Context(), &Principal{Name: "anonymous"})))
			return
		}
		var p *Principal
		why := "this node accepts no credentials"
		if c != nil {
			p, why = c.authenticate(r)
		}
		if p == nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="kernpool"`)
			writeError(w, http.StatusUnauthorized, CodeUnauthorized, why)
			return
		}
		next.ServeHTTP(w, r.WithContext(withPrincipal(r.Context(), p)))
	})
}

// PrincipalOf is the principal Authenticate found for r (nil: none, which
// Allows nothing).
func PrincipalOf(r *http.Request) *Principal { return principalOf(r) }

// isAdmin reports whether the request acts as an admin.
func isAdmin(r *http.Request) bool {
	p := principalOf(r)
	return p != nil && p.Admin
}

// forbidOwner answers 403 when the request may not act for owner.
func forbidOwner(w http.ResponseWriter, r *http.Request, owner string) bool {
	if principalOf(r).Allows(owner) {
		return false
	}
	writeError(w, http.StatusForbidden, CodeForbidden, fmt.Sprintf("this credential may not act for owner %q", owner))
	return true
}

// forbidNonAdmin answers 403 unless the request acts as an admin.
func forbidNonAdmin(w http.ResponseWriter, r *http.Request) bool {
	if p := principalOf(r); p != nil && p.Admin {
		return false
	}
	writeError(w, http.StatusForbidden, CodeForbidden, "this endpoint needs an admin credential")
	return true
}

// hideKernel answers 404, as for a kernel that does not exist, when the
// request may not act for kernel id's owner: a client learns nothing of
// other owners' kernels, not even that they exist.
func (s *Server) hideKernel(w http.ResponseWriter, r *http.Request, id string) bool {
	p := principalOf(r)
	if p != nil && p.Admin {
		return false
	}
	if owner, ok := s.pool.OwnerOf(id); ok && p.Allows(owner) {
		return false
	}
	writeError(w, http.StatusNotFound, CodeNotFound, fmt.Sprintf("kernel %q: %v", id, pool.ErrNotFound))
	return true
}
