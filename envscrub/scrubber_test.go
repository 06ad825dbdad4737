package envscrub

import (
	"errors"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// newTestScrubber builds a Scrubber over a fixed parent environment.
func newTestScrubber(t *testing.T, cfg Config, parent ...string) *Scrubber {
	t.Helper()
	cfg.Parent = func() []string { return slices.Clone(parent) }
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

func envMap(env []string) map[string]string {
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

// TestRules judges one variable at a time through Build: every secret
// substring, every safe prefix (and its case-sensitivity), the Windows
// essentials, and the default drop.
// The rules of parity §1 (the original design's spec), written out once here so
// the tests never take the expected behaviour from the tables under test.
var (
	// specSecretSubstrings: rule 2, a name whose upper-cased form contains
	// one is dropped.
	specSecretSubstrings = []string{"KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL", "PASSWD",
		"AUTH", "DSN", "WEBHOOK", "CREDS", "BEARER", "APIKEY"}
	// specSafePrefixes: rule 3, case-sensitive startswith keeps a name.
	specSafePrefixes = []string{"PATH", "HOME", "USER", "LANG", "LC_", "TERM", "TMPDIR", "TMP", "TEMP",
		"SHELL", "LOGNAME", "XDG_", "PYTHONPATH", "VIRTUAL_ENV", "CONDA"}
	// specWindowsEssentials: rule 4, kept on Windows (compared upper-cased).
	specWindowsEssentials = []string{"SYSTEMROOT", "SYSTEMDRIVE", "WINDIR", "COMSPEC", "PATHEXT", "OS",
		"PROCESSOR_ARCHITECTURE", "NUMBER_OF_PROCESSORS", "PUBLIC", "ALLUSERSPROFILE", "PROGRAMDATA",
		"PROGRAMFILES", "PROGRAMFILES(X86)", "PROGRAMW6432", "APPDATA", "LOCALAPPDATA", "USERPROFILE",
		"USERDOMAIN", "USERNAME", "HOMEDRIVE", "HOMEPATH", "COMPUTERNAME"}
)

func TestRules(t *testing.T) {
	type tc struct {
		name    string
		windows bool
		keep    bool
	}
	var cases []tc
	for _, sub := range specSecretSubstrings {
		cases = append(cases,
			tc{"MY_" + sub + "_X", false, false},
			tc{"PATH_" + sub, false, false},                   // rule 2 runs before the safe prefixes
			tc{strings.ToLower(sub) + "_lower", false, false}, // upper-cased before matching
		)
	}
	for _, p := range specSafePrefixes {
		cases = append(cases,
			tc{p, false, true},
			tc{p + "_EXTRA", false, true},
			tc{strings.ToLower(p) + "x", false, false}, // case-sensitive off Windows
			tc{"X" + p, false, false},                  // a prefix, not a substring
		)
	}
	for _, e := range specWindowsEssentials {
		cases = append(cases,
			tc{e, true, true},
			tc{strings.ToLower(e), true, true},
			tc{e, false, e == "USERNAME" || e == "USERPROFILE" || e == "USERDOMAIN" || e == "HOMEDRIVE" || e == "HOMEPATH" || e == "PATHEXT"},
		)
	}
	cases = append(cases,
		tc{"Path", true, true},   // the reference drops it on Windows: its open bug
		tc{"Path", false, false}, // POSIX names are case-sensitive
		tc{"SystemRoot", true, true},
		tc{"BYPASS_CACHE", false, false}, // PASS is not a secret substring, but nothing keeps it
		tc{"COMPASS_DIR", false, false},
		tc{"DATABASE_URL", false, false},
		tc{"SLACK_WEBHOOK", false, false},
		tc{"SENTRY_DSN", false, false},
		tc{"EDITOR", false, false},
		tc{"KERNPOOL_SOCKET", false, false},
		tc{"PYTHONHOME", false, false},
		tc{"VIRTUAL_ENV_PROMPT", false, true},
		tc{"CONDA_PREFIX", false, true},
	)
	for _, c := range cases {
		if !c.windows && runtime.GOOS == "windows" {
			continue // New forces Windows rules on a Windows host
		}
		s := newTestScrubber(t, Config{Windows: c.windows, Refuse: []string{}}, c.name+"=v")
		env, _, err := s.Build("default", nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		_, got := envMap(env)[c.name]
		if got != c.keep {
			t.Errorf("%s (windows=%v): kept=%v, want %v", c.name, c.windows, got, c.keep)
		}
	}
}

func TestBypassAndCompassAreNotSecret(t *testing.T) {
	for _, n := range []string{"BYPASS_CACHE", "COMPASS_DIR", "PASSENGER_HOST"} {
		if IsSecretName(n) {
			t.Errorf("%s judged secret", n)
		}
	}
	for _, n := range []string{"DB_PASSWORD", "openai_api_key", "SENTRY_DSN", "SLACK_WEBHOOK", "AUTHORIZATION", "GH_CREDS", "X_APIKEY", "BEARER"} {
		if !IsSecretName(n) {
			t.Errorf("%s judged not secret", n)
		}
	}
}

func TestSecretSubstringGroupsCoverList(t *testing.T) {
	for _, sub := range specSecretSubstrings {
		if got := secretSubstring("X" + sub + "X"); got != sub {
			t.Errorf("secretSubstring(%q) = %q", sub, got)
		}
	}
	if got := secretSubstring("PATH_HOME_LANG"); got != "" {
		t.Errorf("got %q", got)
	}
}

func TestPassthrough(t *testing.T) {
	parent := []string{
		"PATH=/usr/bin", "TENOR_API_KEY=tenor-value-123", "MODE_ONLY=m", "REQ_ONLY=r",
		"OPENAI_API_KEY=sk-live-abcdefghijklmnop", "DATABASE_URL=postgres://u:dbpassword1@h/db",
	}
	s := newTestScrubber(t, Config{
		Passthrough:     []string{"TENOR_API_KEY"},
		ModePassthrough: map[string][]string{"data": {"MODE_ONLY"}},
	}, parent...)

	env, scrubbed, err := s.Build("data", []string{"REQ_ONLY"})
	if err != nil {
		t.Fatal(err)
	}
	m := envMap(env)
	for _, want := range []string{"PATH", "TENOR_API_KEY", "MODE_ONLY", "REQ_ONLY"} {
		if _, ok := m[want]; !ok {
			t.Errorf("%s missing from %v", want, env)
		}
	}
	for _, gone := range []string{"OPENAI_API_KEY", "DATABASE_URL"} {
		if _, ok := m[gone]; ok {
			t.Errorf("%s leaked", gone)
		}
	}
	if !slices.Contains(scrubbed, "sk-live-abcdefghijklmnop") || !slices.Contains(scrubbed, "dbpassword1") {
		t.Errorf("scrubbed = %q, want the API key and the DSN password", scrubbed)
	}
	if slices.Contains(scrubbed, "tenor-value-123") {
		t.Error("a passthrough value is not scrubbed")
	}

	// Another mode does not see MODE_ONLY.
	env, _, err = s.Build("default", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := envMap(env)["MODE_ONLY"]; ok {
		t.Error("mode passthrough leaked into another mode")
	}
}

func TestRefusal(t *testing.T) {
	s := newTestScrubber(t, Config{}, "OPENAI_API_KEY=sk-abcdefghijklmnopqrst", "AUXILIARY_VISION_API_KEY=aux-secret-value")
	cases := []struct {
		name string
		rule string
	}{
		{"OPENAI_API_KEY", `refusal list entry "OPENAI_API_KEY"`},
		{"openai_api_key", `refusal list entry "OPENAI_API_KEY"`},
		{"GH_TOKEN", `"GH_TOKEN"`},
		{"GITHUB_TOKEN", `"GITHUB_TOKEN"`},
		{"ANTHROPIC_API_KEY", `"ANTHROPIC_API_KEY"`},
		{"AUXILIARY_VISION_API_KEY", `refusal pattern "AUXILIARY*_API_KEY"`},
		{"AUXILIARY_API_KEY", `refusal pattern "AUXILIARY*_API_KEY"`},
		{"AUXILIARY_X_BASE_URL", `refusal pattern "AUXILIARY*_BASE_URL"`},
		{"GATEWAY_RELAY_SECRET", `refusal pattern "GATEWAY_RELAY*_SECRET"`},
		{"GATEWAY_RELAY_DELIVERY_KEY", `refusal pattern "GATEWAY_RELAY*_KEY"`},
		{"KERNPOOL_SENTINEL", "reserved prefix"},
	}
	for _, c := range cases {
		err := s.CheckPassthrough([]string{c.name})
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), c.rule) || !strings.Contains(err.Error(), c.name) {
			t.Errorf("%s: err = %v, want ErrRefused naming %s", c.name, err, c.rule)
		}
		// And again at spawn: nothing is built.
		env, scrubbed, err := s.Build("default", []string{c.name})
		if !errors.Is(err, ErrRefused) || env != nil || scrubbed != nil {
			t.Errorf("%s: Build = %v, %v, %v; want ErrRefused and nothing", c.name, env, scrubbed, err)
		}
	}
	for _, ok := range []string{"TENOR_API_KEY", "GATEWAY_RELAY_HINT", "MY_BASE_URL"} {
		if err := s.CheckPassthrough([]string{ok}); err != nil {
			t.Errorf("%s refused: %v", ok, err)
		}
	}
	// All bad names are reported at once.
	err := s.CheckPassthrough([]string{"GH_TOKEN", "", "A=B", "FINE"})
	if !errors.Is(err, ErrRefused) || !errors.Is(err, ErrInvalidName) || strings.Contains(err.Error(), "FINE") {
		t.Errorf("joined error = %v", err)
	}
}

func TestNewRefusesConfiguredPassthrough(t *testing.T) {
	_, err := New(Config{Passthrough: []string{"GH_TOKEN"}})
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "GH_TOKEN") {
		t.Errorf("global: %v", err)
	}
	_, err = New(Config{ModePassthrough: map[string][]string{"web": {"ANTHROPIC_API_KEY"}}})
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), `mode "web"`) {
		t.Errorf("mode: %v", err)
	}
	_, err = New(Config{Refuse: []string{"OK_*", "BAD NAME"}})
	if !errors.Is(err, ErrInvalidName) {
		t.Errorf("bad pattern: %v", err)
	}
	// A custom list replaces the default: GH_TOKEN may then pass through.
	if _, err := New(Config{Refuse: []string{"MY_*"}, Passthrough: []string{"GH_TOKEN"}}); err != nil {
		t.Errorf("custom list: %v", err)
	}
	// ...but the reserved prefix never.
	if _, err := New(Config{Refuse: []string{}, Passthrough: []string{"KERNPOOL_RPC_TOKEN"}}); !errors.Is(err, ErrRefused) {
		t.Errorf("reserved: %v", err)
	}
}

// A refused name is dropped even where a safe prefix would keep it, and
// its value is remembered for masking.
func TestRefusedNeverReachesKernel(t *testing.T) {
	s := newTestScrubber(t, Config{Refuse: []string{"PATH_SECRETISH", "HOME_*"}},
		"PATH_SECRETISH=refused-value-1", "HOME_RELAY=refused-value-2", "HOME=/root")
	env, scrubbed, err := s.Build("", nil)
	if err != nil {
		t.Fatal(err)
	}
	m := envMap(env)
	if _, ok := m["PATH_SECRETISH"]; ok {
		t.Error("refused PATH_SECRETISH kept")
	}
	if _, ok := m["HOME_RELAY"]; ok {
		t.Error("refused HOME_RELAY kept")
	}
	if m["HOME"] != "/root" {
		t.Error("HOME lost")
	}
	if !slices.Equal(scrubbed, []string{"refused-value-1", "refused-value-2"}) {
		t.Errorf("scrubbed = %q", scrubbed)
	}
}

func TestScrubbedValues(t *testing.T) {
	s := newTestScrubber(t, Config{},
		"SHORT_TOKEN=abc",                       // below MinSecretLen: not remembered
		"GITHUB_TOKEN=ghp_abcdefghijklmnop1234", // secret by name
		"SENTRY_DSN=https://publickey123456@o1.ingest.sentry.io/1",
		"DATABASE_URL=postgres://app:s3cr3t-pw@db:5432/app", // dropped by rule 5: only the password
		"EDITOR=vim-is-not-a-secret",                        // dropped by rule 5, not secret
		"CACHE_URL=redis://cachehost:6379/0",                // no credentials
	)
	_, scrubbed, err := s.Build("", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"ghp_abcdefghijklmnop1234",
		"https://publickey123456@o1.ingest.sentry.io/1",
		"publickey123456",
		"s3cr3t-pw",
	}
	slices.Sort(want)
	if !slices.Equal(scrubbed, want) {
		t.Errorf("scrubbed = %q, want %q", scrubbed, want)
	}
}

func TestEnvironmentIsReadAtEveryBuild(t *testing.T) {
	val := "one"
	s, err := New(Config{Parent: func() []string { return []string{"LANG=" + val} }})
	if err != nil {
		t.Fatal(err)
	}
	env1, _, _ := s.Build("", nil)
	val = "two"
	env2, _, _ := s.Build("", nil)
	if envMap(env1)["LANG"] != "one" || envMap(env2)["LANG"] != "two" {
		t.Errorf("env1 %v env2 %v", env1, env2)
	}
}

func TestDuplicatesAndMalformed(t *testing.T) {
	s := newTestScrubber(t, Config{}, "LANG=a", "NOEQUALS", "=C:=C:\\x", "LANG=b", "HOME=/h")
	env, _, err := s.Build("", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(env, []string{"LANG=b", "HOME=/h"}) {
		t.Errorf("env = %q", env)
	}
}

func TestPythonPath(t *testing.T) {
	cases := []struct {
		windows bool
		in      string
		want    string // "" means absent
	}{
		{false, "/opt/lib:/srv/kernpool/py:/srv/kernpool/py/sub::/home/u/lib", "/opt/lib:/home/u/lib"},
		{false, "/srv/kernpool/python:/srv/kernpoolx", "/srv/kernpool/python:/srv/kernpoolx"},
		{false, "/srv/kernpool/py", ""},
		{false, "relative/dir", "relative/dir"},
		{true, `C:\lib;;D:\other`, `C:\lib;D:\other`},
	}
	for _, c := range cases {
		if !c.windows && runtime.GOOS == "windows" {
			continue // New forces Windows rules on a Windows host
		}
		s := newTestScrubber(t, Config{Windows: c.windows, PoolInstallDirs: []string{"/srv/kernpool/py/"}}, "PYTHONPATH="+c.in)
		env, _, err := s.Build("", nil)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := envMap(env)["PYTHONPATH"]
		if c.want == "" && ok || got != c.want {
			t.Errorf("PYTHONPATH %q -> %q (present %v), want %q", c.in, got, ok, c.want)
		}
	}
}

func TestGlob(t *testing.T) {
	cases := []struct {
		pat, s string
		want   bool
	}{
		{"A*B", "AB", true}, {"A*B", "AXXB", true}, {"A*B", "AXXBC", false},
		{"*_KEY", "X_KEY", true}, {"*_KEY", "_KEY", true}, {"*_KEY", "KEY", false},
		{"A?C", "ABC", true}, {"A?C", "AC", false}, {"**", "", true},
		{"A*B*C", "AXBXBXC", true}, {"A*B*C", "AXBXBX", false},
	}
	for _, c := range cases {
		if got := globMatch(c.pat, c.s); got != c.want {
			t.Errorf("globMatch(%q, %q) = %v", c.pat, c.s, got)
		}
	}
}

func TestURLCredentials(t *testing.T) {
	cases := map[string][]string{
		"postgres://user:pw@host/db":        {"pw"},
		"https://tok@host/x":                {"tok"},
		"redis://:only-pass@h:6379":         {"only-pass"},
		"https://host/path?x=a@b":           nil,
		"no url here":                       nil,
		"a://u:p1@h b://t2@h":               {"p1", "t2"},
		"mongodb+srv://u:p%40ss@cluster/db": {"p%40ss"},
		"https://user@@host":                {"user@"},
		// A URL without a scheme still carries its password; an empty
		// userinfo carries nothing.
		"://admin:hunter22@db": {"hunter22"},
		"https://@host/x":      nil,
		// Nothing between "://" and the path: no authority, so a ':' and
		// an '@' further on are path bytes, not a password.
		"file:///srv/data:archive2024@v2": nil,
	}
	for in, want := range cases {
		if got := urlCredentials(in); !slices.Equal(got, want) {
			t.Errorf("urlCredentials(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestReservedAndRefusedURLValues(t *testing.T) {
	s := newTestScrubber(t, Config{},
		"KERNPOOL_SOCKET=/run/kernpool/kernpool.sock",
		"OPENAI_BASE_URL=https://relay:relaySecret99@api.example.com/v1",
		"ANTHROPIC_BASE_URL=https://api.anthropic.com",
	)
	env, scrubbed, err := s.Build("", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(env) != 0 {
		t.Errorf("env = %q", env)
	}
	if !slices.Equal(scrubbed, []string{"relaySecret99"}) {
		t.Errorf("scrubbed = %q, want only the URL's password", scrubbed)
	}
}

func TestWindowsCaseInsensitiveNames(t *testing.T) {
	s := newTestScrubber(t, Config{Windows: true, Passthrough: []string{"MY_TOOL_HOME"}},
		"Path=C:\\Windows", "PATH=C:\\Other", "my_tool_home=C:\\t", "SystemRoot=C:\\Windows", "ComSpec=cmd.exe")
	env, _, err := s.Build("", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`PATH=C:\Other`, `my_tool_home=C:\t`, `SystemRoot=C:\Windows`, "ComSpec=cmd.exe"}
	if !slices.Equal(env, want) {
		t.Errorf("env = %q, want %q", env, want)
	}
}

// Dropped names are logged at debug, grouped by rule; values never.
func TestDroppedNamesLoggedNotValues(t *testing.T) {
	var buf strings.Builder
	log := hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: &buf})
	s := newTestScrubber(t, Config{Logger: log},
		"MY_SERVICE_TOKEN=ghp_valueMustNotBeLogged0123", "OPENAI_API_KEY=sk-alsoNotLogged0123456789", "EDITOR=vimNotLogged", "LANG=C")
	if _, _, err := s.Build("web", nil); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"envscrub", "dropped environment variables", "MY_SERVICE_TOKEN", "OPENAI_API_KEY", "EDITOR", "rule=secret-name", "rule=refused", "mode=web"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	for _, value := range []string{"ghp_valueMustNotBeLogged0123", "sk-alsoNotLogged0123456789", "vimNotLogged"} {
		if strings.Contains(out, value) {
			t.Errorf("log holds a value: %s", out)
		}
	}
}
