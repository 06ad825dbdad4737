package k8snodes

import (
	"testing"

	"github.com/kernpool/kernpool/fleet"
)

func ptr[T any](v T) *T { return &v }

func TestFilter(t *testing.T) {
	svc := service{"kernpool-node", "kp"}
	pod := func(node, name, addr string, terminating bool) endpoint {
		e := endpoint{Addresses: []string{addr}, NodeName: ptr(node), TargetRef: &objectRef{Kind: "Pod", Name: name}}
		e.Conditions.Terminating = ptr(terminating)
		return e
	}
	eps := []endpoint{
		pod("n1", "agent-a", "10.1.0.5", false),
		pod("n2", "agent-b", "10.1.0.6", true),
		pod("n3", "agent-c", "fd00::7", false),
		// n4: the old pod terminates while its replacement runs.
		pod("n4", "agent-old", "10.1.0.8", true),
		pod("n4", "agent-new", "10.1.0.9", false),
		{Addresses: []string{"10.1.0.10"}, NodeName: ptr("n5")}, // no targetRef: reachable by address only
	}
	cases := []struct {
		name, node, url string
		live, draining  bool
	}{
		{"dns name", "n1", "https://agent-a.kernpool-node.kp.svc.cluster.local:8443", true, false},
		{"dns name, no domain", "n1", "https://agent-a.kernpool-node.kp.svc:8443", true, false},
		{"dns name, upper case", "n1", "https://AGENT-A.kernpool-node.kp.svc.cluster.local:8443", true, false},
		{"address", "n1", "https://10.1.0.5:8443", true, false},
		{"terminating pod drains", "n2", "https://agent-b.kernpool-node.kp.svc.cluster.local:8443", true, true},
		{"ipv6 address", "n3", "https://[fd00::7]:8443", true, false},
		{"new pod of a node whose old pod terminates", "n4", "https://agent-new.kernpool-node.kp.svc:8443", true, false},
		{"old pod terminating", "n4", "https://agent-old.kernpool-node.kp.svc:8443", true, true},
		{"address without a pod reference", "n5", "https://10.1.0.10:8443", true, false},
		{"name of no pod on the service", "n9", "https://agent-a.kernpool-node.kp.svc:8443", false, false},
		{"another node's pod", "n1", "https://agent-b.kernpool-node.kp.svc:8443", false, false},
		{"another node's address", "n1", "https://10.1.0.6:8443", false, false},
		{"address of no pod", "n1", "https://10.1.0.99:8443", false, false},
		{"another namespace", "n1", "https://agent-a.kernpool-node.other.svc:8443", false, false},
		{"another service", "n1", "https://agent-a.evil.kp.svc:8443", false, false},
		{"a suffix trick", "n1", "https://agent-a.kernpool-node.kp.svcx.example:8443", false, false},
		{"a host the pod name prefixes", "n1", "https://agent-a.kernpool-node.kp.svc-evil.example:8443", false, false},
		{"unparsable url", "n1", "://", false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := filter([]fleet.Node{{Name: c.node, URL: c.url, Free: 3, Max: 4}}, eps, svc)
			if !c.live {
				if len(got) != 0 {
					t.Fatalf("kept %+v, want it dropped", got)
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("dropped %s %s, want it kept", c.node, c.url)
			}
			if got[0].Draining != c.draining || got[0].Free != 3 || got[0].Max != 4 {
				t.Fatalf("got %+v, want draining %v and the heartbeat's capacity", got[0], c.draining)
			}
		})
	}
}

func TestFilterKeepsADrainingHeartbeat(t *testing.T) {
	e := endpoint{Addresses: []string{"10.0.0.1"}, NodeName: ptr("n1")}
	got := filter([]fleet.Node{{Name: "n1", URL: "https://10.0.0.1:1", Draining: true}}, []endpoint{e}, service{"s", "ns"})
	if len(got) != 1 || !got[0].Draining {
		t.Fatalf("got %+v, want the node kept draining", got)
	}
}
