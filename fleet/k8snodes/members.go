package k8snodes

import (
	"net/netip"
	"net/url"
	"strings"

	"github.com/kernpool/kernpool/fleet"
)

// endpointSlice is the part of a discovery.k8s.io/v1 EndpointSlice read
// here.
type endpointSlice struct {
	Metadata  objectMeta `json:"metadata"`
	Endpoints []endpoint `json:"endpoints"`
}

type objectMeta struct {
	Name            string `json:"name"`
	ResourceVersion string `json:"resourceVersion"`
}

// endpoint is one pod of the Service.
type endpoint struct {
	Addresses  []string `json:"addresses"`
	Conditions struct {
		// Terminating: the pod is being deleted (a node drain evicts it).
		// Ready and serving are not read: the node Service publishes
		// not-ready addresses, so both stay true; a node says it drains
		// in its heartbeat.
		Terminating *bool `json:"terminating"`
	} `json:"conditions"`
	NodeName  *string    `json:"nodeName"`
	TargetRef *objectRef `json:"targetRef"`
}

type objectRef struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// service names the endpoints' Service, for the pods' DNS names.
type service struct{ name, namespace string }

// filter keeps the registrations of ns that a pod among eps backs: the
// pod runs on the Kubernetes node the registration is named after, and
// the registration's URL reaches that pod (one of its addresses, or its
// DNS name <pod>.<service>.<namespace>.svc[.<domain>]). A registration
// backed only by terminating pods is kept as draining: its owners move
// and it takes no new ones.
func filter(ns []fleet.Node, eps []endpoint, svc service) []fleet.Node {
	var out []fleet.Node
	for _, n := range ns {
		host := urlHost(n.URL)
		if host == "" {
			continue
		}
		backed, live := false, false
		for i := range eps {
			e := &eps[i]
			if e.NodeName == nil || *e.NodeName != n.Name || !e.reaches(host, svc) {
				continue
			}
			backed = true
			live = live || e.Conditions.Terminating == nil || !*e.Conditions.Terminating
		}
		if !backed {
			continue
		}
		n.Draining = n.Draining || !live
		out = append(out, n)
	}
	return out
}

// urlHost is u's host name in lower case ("" when u does not parse).
func urlHost(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return ""
	}
	return strings.ToLower(p.Hostname())
}

// reaches tells whether host names e's pod.
func (e *endpoint) reaches(host string, svc service) bool {
	if ip, err := netip.ParseAddr(host); err == nil {
		for _, a := range e.Addresses {
			if b, err := netip.ParseAddr(a); err == nil && b.Unmap() == ip.Unmap() {
				return true
			}
		}
		return false
	}
	if e.TargetRef == nil || e.TargetRef.Kind != "Pod" || e.TargetRef.Name == "" {
		return false
	}
	want := strings.ToLower(e.TargetRef.Name + "." + svc.name + "." + svc.namespace + ".svc")
	return host == want || strings.HasPrefix(host, want+".")
}
