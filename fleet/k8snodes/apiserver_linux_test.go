//go:build linux

package k8snodes

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// k8sVersion is the Kubernetes integration/k8s/run builds.
const k8sVersion = "1.34.4"

// cluster is a real etcd and kube-apiserver started for a test.
type cluster struct {
	url, dir, admin, router string
	hc                      *http.Client
}

// startCluster starts etcd (Debian's etcd-server) and the kube-apiserver
// integration/k8s/run builds ($KERNPOOL_K8S_BIN, else its cache), with
// RBAC on and two static tokens: an admin and the router's service
// account.
func startCluster(t *testing.T) *cluster {
	t.Helper()
	bin := os.Getenv("KERNPOOL_K8S_BIN")
	if bin == "" {
		home, _ := os.UserHomeDir()
		bin = filepath.Join(home, ".cache/kernpool/k8s/bin-"+k8sVersion)
	}
	apiserver := filepath.Join(bin, "kube-apiserver")
	if _, err := os.Stat(apiserver); err != nil {
		t.Skipf("no kube-apiserver at %s (integration/k8s/run builds it; or set KERNPOOL_K8S_BIN)", apiserver)
	}
	etcd, err := exec.LookPath("etcd")
	if err != nil {
		t.Skip("no etcd (apt-get install etcd-server)")
	}
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("no kubectl (apt-get install kubernetes-client)")
	}
	c := &cluster{dir: t.TempDir(), admin: "admin-token", router: "router-token"}
	ca := writePKI(t, c.dir)
	write(t, filepath.Join(c.dir, "tokens.csv"), c.admin+",admin,1,system:masters\n"+
		c.router+",system:serviceaccount:kernpool:kernpool-router,2,\"system:serviceaccounts,system:serviceaccounts:kernpool,system:authenticated\"\n")
	ep, pp, sp := freePort(t), freePort(t), freePort(t)
	start(t, c.dir, "etcd", etcd, "--name", "kp", "--data-dir", filepath.Join(c.dir, "etcd"),
		"--listen-client-urls", "http://127.0.0.1:"+ep, "--advertise-client-urls", "http://127.0.0.1:"+ep,
		"--listen-peer-urls", "http://127.0.0.1:"+pp, "--initial-advertise-peer-urls", "http://127.0.0.1:"+pp,
		"--initial-cluster", "kp=http://127.0.0.1:"+pp)
	d := c.dir
	start(t, c.dir, "apiserver", apiserver, "--etcd-servers=http://127.0.0.1:"+ep, "--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1", "--secure-port="+sp, "--endpoint-reconciler-type=none",
		"--tls-cert-file="+d+"/server.crt", "--tls-private-key-file="+d+"/server.key",
		"--token-auth-file="+d+"/tokens.csv", "--authorization-mode=RBAC",
		"--service-cluster-ip-range=10.0.0.0/24", "--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file="+d+"/sa.pub", "--service-account-signing-key-file="+d+"/sa.key", "--profiling=false")
	c.url = "https://127.0.0.1:" + sp
	c.hc = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca}}, Timeout: time.Minute}
	waitFor(t, "the API server ready", func() bool {
		st, _ := c.do(c.admin, http.MethodGet, "/readyz", nil)
		return st == http.StatusOK
	})
	write(t, filepath.Join(d, "admin.kubeconfig"), fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: kp\n  cluster: {server: %q, certificate-authority: %q}\nusers:\n- name: u\n  user: {token: %q}\ncontexts:\n- name: kp\n  context: {cluster: kp, user: u}\ncurrent-context: kp\n", c.url, d+"/ca.crt", c.admin))
	for _, args := range [][]string{{"create", "namespace", "kernpool"},
		{"apply", "-n", "kernpool", "-f", "../../deploy/kubernetes/router/rbac.yaml"}} {
		out, err := exec.Command(kubectl, append([]string{"--kubeconfig", d + "/admin.kubeconfig"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %v: %v\n%s", args, err, out)
		}
	}
	return c
}

// do sends one request as token and returns the status and body.
func (c *cluster) do(token, method, path string, body []byte) (int, string) {
	req, _ := http.NewRequest(method, c.url+path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	if method == http.MethodPatch {
		req.Header.Set("Content-Type", "application/merge-patch+json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

func start(t *testing.T, dir, name, path string, args ...string) {
	t.Helper()
	log, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("%s's log (last 4 KiB):\n%s", name, b[max(0, len(b)-4096):])
		}
		_ = log.Close()
	})
}

// waitFor polls cond until it holds; the deadline only stops a hung test.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func freePort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

func write(t *testing.T, path, s string) {
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

// writePKI writes a CA, the API server's certificate for 127.0.0.1 and
// the service-account key pair into dir, and returns the CA's pool.
func writePKI(t *testing.T, dir string) *x509.CertPool {
	t.Helper()
	key := func() *rsa.PrivateKey {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey, srvKey, saKey := key(), key(), key()
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kp-test-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	srvTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kube-apiserver"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	pemOf := func(typ string, b []byte) string { return string(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b})) }
	saPub, _ := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	write(t, filepath.Join(dir, "ca.crt"), pemOf("CERTIFICATE", caDER))
	write(t, filepath.Join(dir, "server.crt"), pemOf("CERTIFICATE", srvDER))
	write(t, filepath.Join(dir, "server.key"), pemOf("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(srvKey)))
	write(t, filepath.Join(dir, "sa.key"), pemOf("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(saKey)))
	write(t, filepath.Join(dir, "sa.pub"), pemOf("PUBLIC KEY", saPub))
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	return pool
}
