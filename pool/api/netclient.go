package api

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
)

// NetworkOptions are a network client's credentials and trust.
type NetworkOptions struct {
	// Token is a bearer token the node (or router) accepts.
	Token string
	// CAFile is a PEM bundle that verifies the node's certificate
	// (default: the system's roots).
	CAFile string
	// CertFile and KeyFile are a client certificate (mutual TLS).
	CertFile, KeyFile string
	// TLSConfig, when set, is used as is instead of the files.
	TLSConfig *tls.Config
}

// NewNetworkClient returns a client of the API at rawURL, a node's
// network listener or a router in front of nodes: "https://host:port",
// or "http://127.0.0.1:port" on loopback only (a token never crosses a
// network in clear). Everything else is as NewClient's: the same methods
// and errors.
func NewNetworkClient(rawURL string, opts NetworkOptions) (*Client, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") || (u.Path != "" && u.Path != "/") {
		return nil, fmt.Errorf("network client: %q is not an https://host:port URL", rawURL)
	}
	if u.Scheme == "http" && !loopbackURLHost(u.Hostname()) {
		return nil, fmt.Errorf("network client: %s is plain http to a host beyond loopback; use https", rawURL)
	}
	tc := opts.TLSConfig
	if tc == nil && u.Scheme == "https" {
		if tc, err = clientTLS(opts); err != nil {
			return nil, fmt.Errorf("network client: %w", err)
		}
	}
	if tc != nil {
		tc = tc.Clone()
		tc.NextProtos = []string{"http/1.1"} // the node serves HTTP/1.1 only
	}
	dialer := &net.Dialer{Timeout: dialTimeout}
	rt := &http.Transport{
		DialContext:         dialer.DialContext,
		TLSClientConfig:     tc,
		TLSHandshakeTimeout: dialTimeout,
		MaxIdleConnsPerHost: maxIdleConns,
		IdleConnTimeout:     idleConnTimeout,
		DisableCompression:  true,
		// An empty map keeps HTTP/2 off (the node refuses it anyway).
		TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{},
	}
	return &Client{socket: u.Scheme + "://" + u.Host, base: u.Scheme + "://" + u.Host, token: opts.Token, rt: rt}, nil
}

func loopbackURLHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func clientTLS(opts NetworkOptions) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if opts.CAFile != "" {
		pem, err := os.ReadFile(opts.CAFile)
		if err != nil {
			return nil, fmt.Errorf("CA file: %w", err)
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA file %s holds no PEM certificate", opts.CAFile)
		}
		tc.RootCAs = roots
	}
	if (opts.CertFile == "") != (opts.KeyFile == "") {
		return nil, fmt.Errorf("a client certificate needs both its cert and key files")
	}
	if opts.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(opts.CertFile, opts.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// Ready asks GET /v1/ready: the node's state and nil when it takes
// cells, else the state and the *APIError (code draining or closed).
func (c *Client) Ready(ctx context.Context) (NodeState, error) {
	resp, err := c.send(ctx, http.MethodGet, "/v1/ready", nil)
	if err != nil {
		return "", fmt.Errorf("ready: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var body ReadyResponse
	if err == nil {
		err = unmarshal(raw, &body)
	}
	if err != nil {
		return "", fmt.Errorf("ready: %w: %v", ErrProtocol, err)
	}
	if resp.StatusCode != http.StatusOK {
		return body.State, fmt.Errorf("ready: %w", &APIError{StatusCode: resp.StatusCode, Code: body.Code, Message: body.Error})
	}
	return body.State, nil
}

// DrainStatus returns the drain's progress (GET /v1/drain; admin).
func (c *Client) DrainStatus(ctx context.Context) (*DrainStatus, error) {
	var st DrainStatus
	if err := c.do(ctx, http.MethodGet, "/v1/drain", nil, &st); err != nil {
		return nil, fmt.Errorf("drain status: %w", err)
	}
	return &st, nil
}

// Drain starts a drain (POST /v1/drain; admin) and, when progress is
// set, follows it: progress gets each change, and Drain returns the
// last status the node sent ("drained" when it finished; the stream may
// also end with the daemon's exit). Without progress it returns at once
// with the drain's status.
func (c *Client) Drain(ctx context.Context, progress func(DrainStatus)) (*DrainStatus, error) {
	if progress == nil {
		var st DrainStatus
		resp, err := c.send(ctx, http.MethodPost, "/v1/drain", nil)
		if err != nil {
			return nil, fmt.Errorf("drain: %w", err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			return nil, fmt.Errorf("drain: %w", readError(resp))
		}
		if err := decodeResponse(resp, &st); err != nil {
			return nil, fmt.Errorf("drain: %w", err)
		}
		return &st, nil
	}
	resp, err := c.send(ctx, http.MethodPost, "/v1/drain?wait=true", nil)
	if err != nil {
		return nil, fmt.Errorf("drain: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("drain: %w", readError(resp))
	}
	var last *DrainStatus
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var st DrainStatus
		if err := jsonv2.Unmarshal([]byte(line), &st); err != nil {
			return last, fmt.Errorf("drain: %w: %v", ErrProtocol, err)
		}
		last = &st
		progress(st)
	}
	if last == nil {
		return nil, fmt.Errorf("drain: %w: the progress stream ended empty", ErrProtocol)
	}
	return last, nil
}

// Metrics copies the daemon's Prometheus exposition (GET /metrics; admin
// on the network listener) to w and returns the bytes copied; a daemon
// serving no metrics answers 404.
func (c *Client) Metrics(ctx context.Context, w io.Writer) (int64, error) {
	return c.copyGet(ctx, "metrics", "/metrics", w)
}
