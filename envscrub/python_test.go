package envscrub

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kernpool/kernpool/internal/testenv"
)

// daemonEnv is a daemon environment full of secret-shaped names.
func daemonEnv() []string {
	return []string{
		"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "LC_ALL=C.UTF-8", "HOME=/root",
		"USER=root", "TERM=xterm", "SHELL=/bin/sh", "TMPDIR=/tmp", "XDG_RUNTIME_DIR=/run/user/0",
		"BYPASS_CACHE=1", "COMPASS_DIR=/opt/compass",
		"OPENAI_API_KEY=sk-proj-openaiSECRET0123456789abcdef",
		"ANTHROPIC_API_KEY=sk-ant-anthropicSECRET0123456789",
		"GITHUB_TOKEN=ghp_githubSECRET0123456789abcdefghij",
		"GH_TOKEN=gho_ghSECRET0123456789abcdefghijkl",
		"DATABASE_URL=postgres://app:dbSECRETpw123@db:5432/app",
		"SLACK_WEBHOOK=https://hooks.slack.com/services/T00/B00/slackSECRET123",
		"SENTRY_DSN=https://sentrySECRETkey123@o1.ingest.sentry.io/42",
		"AWS_SECRET_ACCESS_KEY=awsSECRETwJalrXUtnFEMIK7MDENGbPxRfi",
		"AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE",
		"AWS_SESSION_TOKEN=awsSessionSECRET0123456789",
		"STRIPE_SECRET_KEY=sk_live_stripeSECRET0123456789",
		"DB_PASSWORD=dbPasswordSECRET1",
		"MYSQL_PWD_AUTH=mysqlAuthSECRET99",
		"NPM_TOKEN=npm_npmSECRET0123456789abcdef",
		"HF_TOKEN=hf_hfSECRET0123456789abcdef",
		"DOCKER_AUTH_CONFIG=dockerAuthSECRET123",
		"TWILIO_CREDS=twilioCredsSECRET1",
		"SERVICE_BEARER=bearerSECRET12345",
		"MY_APIKEY=apikeySECRET123456",
		"SMTP_PASSWD=smtpPasswdSECRET1",
		"GOOGLE_APPLICATION_CREDENTIALS=/secrets/gcpSECRETcreds.json",
		"TELEGRAM_BOT_TOKEN=123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0",
		"TENOR_API_KEY=tenorPassthroughValue1",
		"EDITOR=vim",
	}
}

// runPython starts the real interpreter with env and returns its stdout.
func runPython(t *testing.T, env []string, code string) string {
	t.Helper()
	testenv.RequirePython(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, testenv.Python, "-c", code)
	cmd.Env = env
	cmd.Dir = testTempDir(t)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
	return string(out)
}

// A real child started with the built environment sees none of the
// secret names, keeps the safe ones, and gets the passthrough name.
func TestPythonChildEnvironment(t *testing.T) {
	s := newTestScrubber(t, Config{Passthrough: []string{"TENOR_API_KEY"}}, daemonEnv()...)
	if err := s.CheckPassthrough([]string{"OPENAI_API_KEY"}); err == nil {
		t.Fatal("refused passthrough accepted")
	}
	env, scrubbed, err := s.Build("default", nil)
	if err != nil {
		t.Fatal(err)
	}
	out := runPython(t, env, "import json, os; print(json.dumps(dict(os.environ)))")
	var got map[string]string
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, kv := range daemonEnv() {
		name, value, _ := strings.Cut(kv, "=")
		secret := strings.Contains(value, "SECRET") || strings.HasPrefix(name, "AWS_") || strings.HasPrefix(name, "TELEGRAM") || name == "EDITOR"
		if _, present := got[name]; secret && present {
			t.Errorf("%s reached the child", name)
		}
		if secret && strings.Contains(out, value) {
			t.Errorf("the value of %s reached the child", name)
		}
	}
	for _, name := range []string{"PATH", "LANG", "LC_ALL", "HOME", "USER", "TERM", "SHELL", "TMPDIR", "XDG_RUNTIME_DIR", "TENOR_API_KEY"} {
		if got[name] == "" {
			t.Errorf("%s missing from the child", name)
		}
	}
	for _, gone := range []string{"BYPASS_CACHE", "COMPASS_DIR"} {
		if _, ok := got[gone]; ok {
			t.Errorf("%s is not on a safe prefix and must be dropped", gone)
		}
	}
	if len(scrubbed) < 15 {
		t.Errorf("only %d scrubbed values remembered", len(scrubbed))
	}

	// A refused passthrough at spawn: nothing is built, nothing starts.
	if _, _, err := s.Build("default", []string{"GH_TOKEN"}); err == nil {
		t.Error("Build accepted a refused passthrough")
	}
}

// A cell that reads scrubbed values from a file and prints them, and a
// .env-style dump, come out masked; safe values survive.
func TestPythonOutputMasked(t *testing.T) {
	s := newTestScrubber(t, Config{}, daemonEnv()...)
	env, scrubbed, err := s.Build("default", nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := testTempDir(t)
	var dotenv strings.Builder
	for _, kv := range daemonEnv() {
		dotenv.WriteString(kv + "\n")
	}
	dotenv.WriteString("LOCAL_ONLY_TOKEN=localOnlyOpaque0123456789\nMAX_TOKENS=100\n")
	envFile := filepath.Join(dir, ".env")
	if err := os.WriteFile(envFile, []byte(dotenv.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	code := `import sys
lines = open(sys.argv[1]).read().splitlines()
vals = [l.split("=", 1)[1] for l in lines]
print("values:", " | ".join(vals))
sys.stdout.flush()
print("dump:")
print("\n".join(lines))
half = vals[12]
sys.stdout.write(half[:7]); sys.stdout.flush()
import subprocess; subprocess.run(["/bin/echo", half[7:]])
`
	testenv.RequirePython(t)
	cmd := exec.Command(testenv.Python, "-c", code, envFile)
	cmd.Env = env
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, raw)
	}
	f := NewPipeline(OutputConfig{}).Filter(append(scrubbed, "rpc-token-0123456789"))
	out, err := f.Finish(string(raw), "", "", 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range daemonEnv() {
		name, value, _ := strings.Cut(kv, "=")
		if strings.Contains(value, "SECRET") && strings.Contains(out.Stdout, value) {
			t.Errorf("value of %s leaked:\n%s", name, out.Stdout)
		}
	}
	// Not in the daemon's environment, so only its assignment is masked.
	for _, leak := range []string{"LOCAL_ONLY_TOKEN=localOnlyOpaque0123456789", "dbSECRETpw123", "sentrySECRETkey123"} {
		if strings.Contains(out.Stdout, leak) {
			t.Errorf("%s leaked", leak)
		}
	}
	for _, keep := range []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "MAX_TOKENS=100", "BYPASS_CACHE=1", "EDITOR=vim"} {
		if !strings.Contains(out.Stdout, keep) {
			t.Errorf("%q lost:\n%s", keep, out.Stdout)
		}
	}
}

// A secret with quotes and a backslash printed through json.dumps and repr
// is masked in its escaped spellings too.
func TestPythonEscapedSecret(t *testing.T) {
	secret := `pa"ss'w\ord-9x`
	s := newTestScrubber(t, Config{}, "PATH=/usr/bin:/bin", "MY_DB_PASSWORD="+secret)
	env, scrubbed, err := s.Build("", nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := testTempDir(t)
	file := filepath.Join(dir, "secret.txt")
	if err := os.WriteFile(file, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	code := "import json, sys\nv = open(sys.argv[1]).read()\nprint(json.dumps({'v': v}))\nprint(repr(v))\nprint(repr([v]))\nprint(v)"
	testenv.RequirePython(t)
	cmd := exec.Command(testenv.Python, "-c", code, file)
	cmd.Env = env
	raw, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	got := NewPipeline(OutputConfig{DisablePatternRedaction: true}).Filter(scrubbed).Clean(string(raw))
	for _, frag := range []string{"pa", "ss", "ord-9x"} {
		if strings.Contains(got, frag) {
			t.Errorf("fragment %q of the secret survives:\n%s\n(raw:\n%s)", frag, got, raw)
		}
	}
}
