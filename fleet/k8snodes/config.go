package k8snodes

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
)

// saDir is where the kubelet mounts a pod's service-account credentials.
const saDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// Config says which Service's endpoints to watch and how to reach the
// API server.
type Config struct {
	// Server is the API server's URL (https://host:port).
	Server string
	// TokenFile holds the bearer token; it is read again for every
	// request, as the kubelet rotates bound service-account tokens.
	TokenFile string
	// CAFile verifies the API server's certificate.
	CAFile string
	// Namespace and Service name the node agents' Service.
	Namespace string
	Service   string
	Logger    hclog.Logger
}

// dnsLabel is a Kubernetes namespace or Service name.
var dnsLabel = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// InCluster is the Config of a pod: the API server from
// $KUBERNETES_SERVICE_HOST and _PORT, the pod's service-account token
// and CA, and its namespace unless namespace is given.
func InCluster(svc, namespace string) (Config, error) {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return Config{}, fmt.Errorf("%w: not in a pod ($KUBERNETES_SERVICE_HOST or _PORT unset)", ErrConfig)
	}
	if namespace == "" {
		b, err := os.ReadFile(saDir + "/namespace")
		if err != nil {
			return Config{}, fmt.Errorf("%w: the pod's namespace: %v", ErrConfig, err)
		}
		namespace = strings.TrimSpace(string(b))
	}
	return Config{Server: "https://" + net.JoinHostPort(host, port), TokenFile: saDir + "/token",
		CAFile: saDir + "/ca.crt", Namespace: namespace, Service: svc}, nil
}

// validate checks c and builds its HTTP client.
func (c *Config) client() (*http.Client, error) {
	if !dnsLabel.MatchString(c.Service) || !dnsLabel.MatchString(c.Namespace) {
		return nil, fmt.Errorf("%w: service %q in namespace %q (DNS labels)", ErrConfig, c.Service, c.Namespace)
	}
	if !strings.HasPrefix(c.Server, "https://") {
		return nil, fmt.Errorf("%w: API server %q is not https", ErrConfig, c.Server)
	}
	if _, err := c.token(); err != nil {
		return nil, err
	}
	pem, err := os.ReadFile(c.CAFile)
	if err != nil {
		return nil, fmt.Errorf("%w: CA: %v", ErrConfig, err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%w: CA %s holds no PEM certificate", ErrConfig, c.CAFile)
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	return &http.Client{Transport: &http.Transport{
		TLSClientConfig:       &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 30 * time.Second,
		MaxIdleConnsPerHost:   2,
	}}, nil
}

func (c *Config) token() (string, error) {
	b, err := os.ReadFile(c.TokenFile)
	if err != nil {
		return "", fmt.Errorf("%w: token: %v", ErrConfig, err)
	}
	t := strings.TrimSpace(string(b))
	if t == "" {
		return "", fmt.Errorf("%w: token file %s is empty", ErrConfig, c.TokenFile)
	}
	return t, nil
}
