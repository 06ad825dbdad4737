package ckpts3

import (
	"cmp"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Config says where the store is and how to reach it.
type Config struct {
	// URL is checkpoint_store: s3://bucket[/prefix].
	URL string
	// Endpoint is the server (host[:port] or an http(s) URL); "" takes
	// AWS_ENDPOINT_URL_S3, then AWS_ENDPOINT_URL, then Amazon S3. A
	// server other than Amazon's is addressed path-style
	// (https://host/bucket/key), which every S3-compatible server serves.
	Endpoint string
	// Region; "" takes AWS_REGION, then AWS_DEFAULT_REGION, then what
	// the server says.
	Region string
	// AllowHTTP is the explicit opt-out of TLS an http:// endpoint needs.
	AllowHTTP bool
	// Transport carries the requests (nil: http.DefaultTransport's
	// settings); tests and custom CAs set it.
	Transport http.RoundTripper
	// MaxObjectBytes bounds an object Get opens (0: no bound here; the
	// pool checks sizes against its cap too).
	MaxObjectBytes int64
	// Getenv reads the environment (nil: os.Getenv).
	Getenv func(string) string
}

// parsed is a Config resolved against the environment.
type parsed struct {
	bucket, prefix string
	host           string
	secure, path   bool
	region         string
	creds          *credentials.Credentials
}

// parse validates cfg and resolves it; every error names what to fix.
func (cfg Config) parse() (*parsed, error) {
	env := cfg.Getenv
	if env == nil {
		env = os.Getenv
	}
	u, err := url.Parse(cfg.URL)
	if err != nil || u.Scheme != "s3" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%q: %w", cfg.URL, ErrBadURL)
	}
	p := &parsed{bucket: u.Host, prefix: strings.Trim(u.Path, "/")}
	if strings.Contains(p.prefix, "//") || strings.Contains("/"+p.prefix+"/", "/../") || strings.Contains("/"+p.prefix+"/", "/./") {
		return nil, fmt.Errorf("%q: the prefix has an empty, . or .. segment: %w", cfg.URL, ErrBadURL)
	}
	endpoint := cmp.Or(cfg.Endpoint, env("AWS_ENDPOINT_URL_S3"), env("AWS_ENDPOINT_URL"), "https://s3.amazonaws.com")
	if !strings.Contains(endpoint, "://") {
		endpoint = "https://" + endpoint
	}
	e, err := url.Parse(endpoint)
	if err != nil || e.Host == "" || (e.Path != "" && e.Path != "/") || e.User != nil || e.RawQuery != "" {
		return nil, fmt.Errorf("S3 endpoint %q: want host[:port] or http(s)://host[:port]", endpoint)
	}
	switch e.Scheme {
	case "https":
		p.secure = true
	case "http":
		if !cfg.AllowHTTP {
			return nil, fmt.Errorf("S3 endpoint %s: %w", endpoint, ErrPlainHTTP)
		}
	default:
		return nil, fmt.Errorf("S3 endpoint %q: scheme must be https or http", endpoint)
	}
	p.host = e.Host
	p.path = !strings.HasSuffix(e.Hostname(), "amazonaws.com")
	p.region = cmp.Or(cfg.Region, env("AWS_REGION"), env("AWS_DEFAULT_REGION"))
	p.creds, err = resolveCreds(env)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// resolveCreds takes the AWS variables, else the shared credentials
// file (AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials, profile
// AWS_PROFILE or default). Anonymous access is refused: a bucket that
// takes unsigned writes is not a place for tenants' state.
func resolveCreds(env func(string) string) (*credentials.Credentials, error) {
	if id, secret := env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY"); id != "" || secret != "" {
		if id == "" || secret == "" {
			return nil, fmt.Errorf("S3 credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must both be set: %w", ErrNoCredentials)
		}
		return credentials.NewStaticV4(id, secret, env("AWS_SESSION_TOKEN")), nil
	}
	file := env("AWS_SHARED_CREDENTIALS_FILE")
	if file == "" {
		home := cmp.Or(env("HOME"), "/root")
		file = filepath.Join(home, ".aws", "credentials")
	}
	if _, err := os.Stat(file); err != nil {
		return nil, fmt.Errorf("S3 credentials: %w", ErrNoCredentials)
	}
	profile := cmp.Or(env("AWS_PROFILE"), "default")
	creds := credentials.NewFileAWSCredentials(file, profile)
	v, err := creds.GetWithContext(nil)
	if err != nil || v.AccessKeyID == "" || v.SecretAccessKey == "" {
		return nil, fmt.Errorf("S3 credentials: file %s has no key for profile %q (%v): %w", file, profile, err, ErrNoCredentials)
	}
	return credentials.NewStaticV4(v.AccessKeyID, v.SecretAccessKey, v.SessionToken), nil
}
