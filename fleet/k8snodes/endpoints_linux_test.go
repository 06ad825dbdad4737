//go:build linux

package k8snodes

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kernpool/kernpool/fleet"
)

const slicesPath = "/apis/discovery.k8s.io/v1/namespaces/kernpool/endpointslices"

// sliceJSON is an EndpointSlice of service with one pod on node.
func sliceJSON(name, service, node, pod, addr string, terminating bool) []byte {
	return fmt.Appendf(nil, `{"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice",
"metadata":{"name":%q,"labels":{"kubernetes.io/service-name":%q}},"addressType":"IPv4",
"ports":[{"name":"api","port":8443,"protocol":"TCP"}],
"endpoints":[{"addresses":[%q],"conditions":{"ready":true,"serving":true,"terminating":%v},
"nodeName":%q,"targetRef":{"kind":"Pod","namespace":"kernpool","name":%q}}]}`, name, service, addr, terminating, node, pod)
}

func (c *cluster) must(t *testing.T, method, path string, body []byte, want int) {
	t.Helper()
	if st, out := c.do(c.admin, method, path, body); st != want {
		t.Fatalf("%s %s: %d %s, want %d", method, path, st, out, want)
	}
}

// names lists the nodes m keeps of regs, a draining one with a "~".
func names(m *Members, regs []fleet.Node) string {
	var out []string
	for _, n := range m.Filter(regs) {
		out = append(out, n.Name+map[bool]string{true: "~"}[n.Draining])
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// TestMembersFollowEndpointSlices runs the watch against a real API
// server with the router's own RBAC (deploy/kubernetes/router/rbac.yaml).
func TestMembersFollowEndpointSlices(t *testing.T) {
	c := startCluster(t)
	tok := filepath.Join(c.dir, "router.token")
	write(t, tok, c.router)
	cfg := Config{Server: c.url, TokenFile: tok, CAFile: filepath.Join(c.dir, "ca.crt"), Namespace: "kernpool", Service: "kernpool-node"}
	dns := func(pod string) string { return "https://" + pod + ".kernpool-node.kernpool.svc.cluster.local:8443" }
	regs := []fleet.Node{{Name: "n1", URL: dns("agent-a")}, {Name: "n2", URL: dns("agent-b")},
		{Name: "n3", URL: "https://10.1.0.7:8443"}, {Name: "rogue", URL: "https://10.9.9.9:8443"}}
	c.must(t, http.MethodPost, slicesPath, sliceJSON("a", "kernpool-node", "n1", "agent-a", "10.1.0.5", false), http.StatusCreated)
	// Another Service's pods back no registration.
	c.must(t, http.MethodPost, slicesPath, sliceJSON("other", "other-svc", "n3", "agent-c", "10.1.0.7", false), http.StatusCreated)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	m, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	if got := names(m, regs); got != "n1" {
		t.Fatalf("after the first listing: %q, want n1", got)
	}
	steps := []struct {
		what, method, path string
		body               []byte
		status             int
		want               string
	}{
		{"a pod added", http.MethodPost, slicesPath, sliceJSON("b", "kernpool-node", "n2", "agent-b", "10.1.0.6", false), http.StatusCreated, "n1 n2"},
		{"a pod terminating", http.MethodPatch, slicesPath + "/a", sliceJSON("a", "kernpool-node", "n1", "agent-a", "10.1.0.5", true), http.StatusOK, "n1~ n2"},
		{"a pod by address", http.MethodPost, slicesPath, sliceJSON("c", "kernpool-node", "n3", "agent-c", "10.1.0.7", false), http.StatusCreated, "n1~ n2 n3"},
		{"a slice deleted", http.MethodDelete, slicesPath + "/b", nil, http.StatusOK, "n1~ n3"},
	}
	for _, s := range steps {
		c.must(t, s.method, s.path, s.body, s.status)
		waitFor(t, s.what+": "+s.want, func() bool { return names(m, regs) == s.want })
	}
}

// TestRouterRBAC checks the router's role is what discovery needs and no
// more, and that Start fails closed without it.
func TestRouterRBAC(t *testing.T) {
	c := startCluster(t)
	for _, r := range []struct {
		method, path string
		want         int
	}{
		{http.MethodGet, slicesPath, http.StatusOK},
		{http.MethodGet, slicesPath + "?watch=true&timeoutSeconds=1", http.StatusOK},
		{http.MethodPost, slicesPath, http.StatusForbidden},
		{http.MethodGet, "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices", http.StatusForbidden},
		{http.MethodGet, "/apis/discovery.k8s.io/v1/endpointslices", http.StatusForbidden},
		{http.MethodGet, "/api/v1/namespaces/kernpool/secrets", http.StatusForbidden},
		{http.MethodGet, "/api/v1/namespaces/kernpool/pods", http.StatusForbidden},
		{http.MethodGet, "/api/v1/nodes", http.StatusForbidden},
	} {
		if st, out := c.do(c.router, r.method, r.path, []byte("{}")); st != r.want {
			t.Errorf("router %s %s: %d %s, want %d", r.method, r.path, st, out, r.want)
		}
	}
	tok := filepath.Join(c.dir, "router.token")
	write(t, tok, c.router)
	bad := filepath.Join(c.dir, "bad.token")
	write(t, bad, "not-a-token")
	for _, cfg := range []Config{
		{Server: c.url, TokenFile: bad, CAFile: filepath.Join(c.dir, "ca.crt"), Namespace: "kernpool", Service: "kernpool-node"},
		{Server: c.url, TokenFile: tok, CAFile: filepath.Join(c.dir, "ca.crt"), Namespace: "default", Service: "kernpool-node"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		m, err := Start(ctx, cfg)
		cancel()
		if !errors.Is(err, ErrNotSynced) || !strings.Contains(err.Error(), map[bool]string{true: "401", false: "403"}[cfg.TokenFile == bad]) {
			t.Errorf("Start(%s in %s): %v, want not synced with the API's refusal", filepath.Base(cfg.TokenFile), cfg.Namespace, err)
		}
		if m != nil {
			m.Stop()
		}
	}
}
