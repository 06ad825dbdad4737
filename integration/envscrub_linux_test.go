//go:build integration && linux

package integration

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// Secrets planted in the daemon's environment. None may reach a cell, and
// each literal must be redacted from any output.
const (
	openAIKey   = "sk-proj-Abcdefghijklmnopqrstuvwxyz0123456789ABCD"
	ghToken     = "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB"
	dbPassword  = "S3cretPw0rdValue"
	databaseURL = "postgres://app:" + dbPassword + "@db.internal:5432/app"
	webhook     = "https://hooks.slack.com/services/T0000/B0000/abcdefghijklmnopqrstuvwx"
	servicePass = "hunter2-is-not-a-password-x9"
)

func secretEnv() []string {
	return []string{
		"OPENAI_API_KEY=" + openAIKey, "GH_TOKEN=" + ghToken, "DATABASE_URL=" + databaseURL,
		"SLACK_WEBHOOK=" + webhook, "SENTRY_DSN=https://abc123def456@o1.ingest.sentry.io/1",
		"MY_SERVICE_PASSWORD=" + servicePass, "BYPASS_CACHE=1", "COMPASS_DIR=/opt/compass",
		"LC_ALL=C.UTF-8", "XDG_CONFIG_HOME=/tmp/xdg", "ITEST_PASSTHRU=visible",
	}
}

// TestEnvScrubEndToEnd: the cell sees exactly the safe variables, the
// passthrough, and none of the secrets or runner-only variables.
func TestEnvScrubEndToEnd(t *testing.T) {
	requireDaemon(t)
	o := capped()
	o.Env, o.Passthrough = secretEnv(), []string{"ITEST_PASSTHRU"}
	d := StartDaemon(t, o)
	res := d.Run(t, "env", "import os, json\nprint(json.dumps(sorted(os.environ)))")
	var names []string
	if err := json.Unmarshal([]byte(strings.TrimSpace(res.Output)), &names); err != nil {
		t.Fatalf("env listing %q: %v", res.Output, err)
	}
	have := map[string]bool{}
	for _, n := range names {
		have[n] = true
	}
	for _, n := range []string{"OPENAI_API_KEY", "GH_TOKEN", "DATABASE_URL", "SLACK_WEBHOOK", "SENTRY_DSN",
		"MY_SERVICE_PASSWORD", "BYPASS_CACHE", "COMPASS_DIR", "KERNPOOL_SENTINEL", "KERNPOOL_RPC_TOKEN",
		"KERNPOOL_RPC_ENDPOINT", "KERNPOOL_CGROUP_PROCS", "KERNPOOL_CGROUP_KILL", "KERNPOOL_RLIMITS"} {
		if have[n] {
			t.Errorf("%s reached the cell's os.environ", n)
		}
	}
	for _, n := range []string{"PATH", "HOME", "LANG", "LC_ALL", "XDG_CONFIG_HOME", "ITEST_PASSTHRU", "TMPDIR"} {
		if !have[n] {
			t.Errorf("%s is missing from the cell's environment (have %v)", n, names)
		}
	}
	shutdownAndCheck(t, d, "env")
}

// TestRunnerSecretsNotInProcEnviron: deleting KERNPOOL_* from os.environ
// does not erase them from /proc/self/environ, which any cell can read; the
// RPC token and the frame sentinel must not be recoverable there.
func TestRunnerSecretsNotInProcEnviron(t *testing.T) {
	requireDaemon(t)
	d := StartDaemon(t, capped())
	res := d.RunReq(t, ExecReq{Owner: "peek", Tools: []string{"echo"}, Timeout: "30s", Code: `
env = open('/proc/self/environ', 'rb').read().split(b'\0')
print(sorted(e.split(b'=', 1)[0].decode() for e in env if e.startswith(b'KERNPOOL_')))`})
	// The cell must have run and printed its (possibly empty) list.
	if res.Status != "success" || !strings.HasPrefix(res.Output, "[") || !strings.HasSuffix(res.Output, "]\n") {
		t.Fatalf("the environ-reading cell did not run: status %q error %q output %q", res.Status, res.Error, res.Output)
	}
	for _, n := range []string{"KERNPOOL_RPC_TOKEN", "KERNPOOL_SENTINEL"} {
		if strings.Contains(res.Output, n) {
			t.Errorf("%s is readable from /proc/self/environ by any cell: %s", n, res.Output)
		}
	}
	shutdownAndCheck(t, d, "peek")
}

// TestRedactionEndToEnd: secrets the cell prints (scrubbed values it knows
// literally, pattern tokens, headers, DSNs, PEM blocks) are masked in the
// output and in tracebacks.
func TestRedactionEndToEnd(t *testing.T) {
	requireDaemon(t)
	o := capped()
	o.Env = secretEnv()
	d := StartDaemon(t, o)
	code := `
print("db " + "S3cretPw0rd" + "Value")
print("svc " + "hunter2-is-not-a-" + "password-x9")
print("key sk-proj-" + "Abcdefghijklmnopqrstuvwxyz0123456789ABCD")
print("gh ghp_" + "0123456789abcdefghijklmnopqrstuvwxyzAB")
print("Authorization: Bearer " + "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U")
print("dsn mysql://root:" + "TopSecretDbPass1" + "@localhost/db")
print("-----BEGIN " + "PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----")
`
	res := d.Run(t, "red", code)
	var leaked []string
	for _, s := range []string{dbPassword, servicePass, openAIKey, ghToken, "TopSecretDbPass1",
		"dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U", "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC"} {
		if strings.Contains(res.Output, s) {
			leaked = append(leaked, s[:8]+"...")
		}
	}
	if len(leaked) > 0 {
		t.Errorf("secrets %v are in the output:\n%s", leaked, res.Output)
	}
	if !strings.Contains(res.Output, "Authorization: Bearer") || !strings.Contains(res.Output, "svc ") {
		t.Errorf("redaction ate the surrounding text:\n%s", res.Output)
	}
	tb := d.Run(t, "red", `raise RuntimeError("leak " + "sk-proj-" + "Abcdefghijklmnopqrstuvwxyz0123456789ABCD")`)
	if tb.Status != "error" || strings.Contains(tb.Output+tb.Error, openAIKey) {
		t.Errorf("traceback not redacted or wrong status %q:\n%s\n%s", tb.Status, tb.Output, tb.Error)
	}
	shutdownAndCheck(t, d, "red")
}

// TestRefusedPassthrough: a request asking for a provider credential is
// refused with a clear error and the credential never reaches a cell.
func TestRefusedPassthrough(t *testing.T) {
	requireDaemon(t)
	o := capped()
	o.Env = secretEnv()
	d := StartDaemon(t, o)
	res, err := d.API().Execute(context.Background(), ExecReq{Owner: "greedy", Passthrough: []string{"OPENAI_API_KEY"},
		Code: "import os\nprint(os.environ.get('OPENAI_API_KEY', 'absent'))", Timeout: "30s"})
	var apiErr *APIError
	switch {
	case errors.As(err, &apiErr):
		if apiErr.Status/100 != 4 || !strings.Contains(apiErr.Body, "OPENAI_API_KEY") {
			t.Errorf("refusal is not a clear 4xx naming the variable: %v", apiErr)
		}
	case err != nil:
		t.Fatalf("execute: %v", err)
	default:
		d.noteResult(res)
		if strings.Contains(res.Output, openAIKey) || res.Status == "success" && !strings.Contains(res.Output, "absent") {
			t.Errorf("a refused passthrough reached the cell: %+v", res)
		}
		if res.Status == "success" && res.Error == "" && res.Warning == "" {
			t.Errorf("the refusal was silent: %+v", res)
		}
	}
	shutdownAndCheck(t, d, "greedy")
}
