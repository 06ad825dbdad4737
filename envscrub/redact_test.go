package envscrub

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

type redactCase struct {
	name, in, want string
}

// runRedact checks Clean (patterns on, no exact secrets) and idempotency.
func runRedact(t *testing.T, cases []redactCase) {
	t.Helper()
	f := NewPipeline(OutputConfig{}).Filter(nil)
	for _, c := range cases {
		got := f.Clean(c.in)
		if got != c.want {
			t.Errorf("%s:\n  in   %q\n  got  %q\n  want %q", c.name, c.in, got, c.want)
		}
		if again := f.Clean(got); again != got {
			t.Errorf("%s: not idempotent: %q -> %q", c.name, got, again)
		}
	}
}

const body30 = "abcdefghijklmnopqrstuvwxyz0123" // 30 alphanumerics

// Every prefix rule: a positive case (masked), a glued case (kept), and a
// too-short case (kept).
func TestPrefixTokens(t *testing.T) {
	var cases []redactCase
	for _, c := range specTokens {
		cases = append(cases,
			redactCase{c.token + " positive", "key: " + c.token + " end", "key: " + c.masked + " end"},
			redactCase{c.token + " glued before", "x" + c.token + " end", "x" + c.token + " end"},
		)
		if c.short != "" {
			cases = append(cases, redactCase{c.short + " too short", c.short + " end", c.short + " end"})
		}
	}
	cases = append(cases,
		redactCase{"ghp_ glued after", "ghp_Ab3De6Gh9Jk2Mn5Pq8St-more", "ghp_Ab3De6Gh9Jk2Mn5Pq8St-more"},
		redactCase{"hf_ glued after", "hf_Ab3De6Gh9Jk2Mn5Pq8St_more", "hf_Ab3De6Gh9Jk2Mn5Pq8St_more"},
		redactCase{"xoxb- glued after", "xoxb-Ab3De6Gh9Jk2Mn5Pq8St_more", "xoxb-Ab3De6Gh9Jk2Mn5Pq8St_more"},
		redactCase{"sk_live_ short is still an sk_ token", "sk_live_Ab3De6Gh9 end", "*** end"},
	)
	cases = append(cases,
		redactCase{"short token becomes ***", "sk-abcdefghij!", "***!"},
		redactCase{"long keeps 6+4", "sk-proj-abcdefghijklmnop0123", "sk-pro...0123"},
		redactCase{"sk- dotted body", "sk-sp.abcdef.ghijkl.mnop.", "sk-sp....mnop."},
		redactCase{"sk- no double dots", "sk-abc..defghijklmnop", "sk-abc..defghijklmnop"},
		redactCase{"AKIA needs exactly 16", "AKIAABCDEFGHIJKLMNOPQ", "AKIAABCDEFGHIJKLMNOPQ"},
		redactCase{"after JSON escape", `"line\nghp_` + body30 + `"`, `"line\nghp_ab...0123"`},
		redactCase{"after unicode escape", `\u00e9ghp_` + body30, `\u00e9ghp_ab...0123`},
		redactCase{"after hex escape", `\x41ghp_` + body30, `\x41ghp_ab...0123`},
		redactCase{"in URL path", "https://h/ghp_" + body30 + "/x", "https://h/ghp_ab...0123/x"},
		redactCase{"zhipu", strings.Repeat("a1", 16) + ".AbCdEfGhIjKlMnOpQr", "a1a1a1...OpQr"},
		redactCase{"zhipu glued", "x" + strings.Repeat("a1", 16) + ".AbCdEfGhIjKlMnOpQr", "x" + strings.Repeat("a1", 16) + ".AbCdEfGhIjKlMnOpQr"},
		redactCase{"zhipu short suffix", strings.Repeat("a1", 16) + ".AbCdEf", strings.Repeat("a1", 16) + ".AbCdEf"},
		redactCase{"prose untouched", "ask-questions and gh-pages, skills_test", "ask-questions and gh-pages, skills_test"},
	)
	runRedact(t, cases)
}

func TestAssignments(t *testing.T) {
	runRedact(t, []redactCase{
		{"env dump strong", "DB_PASSWORD=hunter2", "DB_PASSWORD=***"},
		{"env dump long", "MY_SERVICE_TOKEN=abc123randomstringXYZ", "MY_SERVICE_TOKEN=abc123...gXYZ"},
		{"spaces kept", "API_SECRET = 'topsecretvalue1234567'", "API_SECRET = 'topsec...4567'"},
		{"double quotes", `SLACK_WEBHOOK="https://hooks.slack.com/services/T0/B0/XXXX"`, `SLACK_WEBHOOK="https:...XXXX"`},
		{"export", "export SENTRY_DSN=https://k@o1.sentry.io/1", "export SENTRY_DSN=https:...io/1"},
		{"dotenv line", ".env:\nOPENAI_API_KEY=opaqueValue12345678\nDEBUG=1", ".env:\nOPENAI_API_KEY=opaque...5678\nDEBUG=1"},
		{"ambiguous key short value kept", "MAX_TOKENS=100", "MAX_TOKENS=100"},
		{"ambiguous key opaque value", "SORT_KEY=Zq9xV8pL3mN5bT7wR9yK", "SORT_KEY=Zq9xV8...R9yK"},
		{"BYPASS_CACHE not secret", "BYPASS_CACHE=abcdefghijklmnopqrstuvwxyz", "BYPASS_CACHE=abcdefghijklmnopqrstuvwxyz"},
		{"COMPASS_DIR not secret", "COMPASS_DIR=/very/long/path/abcdefghij", "COMPASS_DIR=/very/long/path/abcdefghij"},
		{"env reference kept", "API_TOKEN=$GITHUB_TOKEN", "API_TOKEN=$GITHUB_TOKEN"},
		{"os.getenv kept", "API_KEY=os.getenv('API_KEY')", "API_KEY=os.getenv('API_KEY')"},
		{"path kept for non-password", "SSH_AUTH_SOCK=/run/user/0/ssh-agent.sock", "SSH_AUTH_SOCK=/run/user/0/ssh-agent.sock"},
		{"path masked for password", "DB_PASSWORD=/etc/pw", "DB_PASSWORD=***"},
		{"comparison skipped", "if API_KEY == value", "if API_KEY == value"},
		{"lowercase secret word", "db_password=hunter22", "db_password=***"},
		{"lowercase word inside word kept", "monkey=banana author=Smith", "monkey=banana author=Smith"},
		{"url query passes through", "https://x/cb?token=abcdefgh12345678XY", "https://x/cb?token=abcdefgh12345678XY"},
		{"value after spaces", "API_KEY= next", "API_KEY= ***"},
		{"no value across lines", "API_KEY=\nnext", "API_KEY=\nnext"},
		{"mask kept", "API_KEY=abcdef...wxyz", "API_KEY=abcdef...wxyz"},
	})
}

func TestHeaders(t *testing.T) {
	runRedact(t, []redactCase{
		{"bearer", "Authorization: Bearer abcdefghijklmnopqrstuvwxyz", "Authorization: Bearer abcdef...wxyz"},
		{"proxy basic short", "Proxy-Authorization: Basic dXNlcjpw", "Proxy-Authorization: Basic ***"},
		{"bare credential", "authorization:opaquecredentialvalue123", "authorization:opaque...e123"},
		{"quote not swallowed", `-H 'Authorization: token abcdefghij'`, `-H 'Authorization: token ***'`},
		{"no credential", "Authorization:\n", "Authorization:\n"},
		{"x-api-key", "x-api-key: abcdefghijklmnopqrstuvwxyz", "x-api-key: abcdef...wxyz"},
		{"X-Goog-Api-Key", "X-Goog-Api-Key:short", "X-Goog-Api-Key:***"},
		{"api-key", "api-key : k1", "api-key : ***"},
		{"x-auth-token", "x-auth-token: t", "x-auth-token: ***"},
		{"x-access-token", "X-Access-Token: abcdefghijklmnopqrstuvwxyz", "X-Access-Token: abcdef...wxyz"},
		{"other header kept", "Content-Type: application/json", "Content-Type: application/json"},
		{"author is not auth", "Author: Jane Doe", "Author: Jane Doe"},
	})
}

func TestQuotedKeys(t *testing.T) {
	runRedact(t, []redactCase{
		{"python dict", "{'OPENAI_API_KEY': 'opaqueValue12345678', 'HOME': '/root'}", "{'OPENAI_API_KEY': 'opaque...5678', 'HOME': '/root'}"},
		{"json", `{"password": "hunter2", "user": "bob"}`, `{"password": "***", "user": "bob"}`},
		{"json spaces", `{"api_key" : "abcdefghijklmnopqrstuvwxyz"}`, `{"api_key" : "abcdef...wxyz"}`},
		{"bytes repr", "{'SECRET': b'rawbytes'}", "{'SECRET': b'***'}"},
		{"header dict", "{'X-Api-Key': 'k', 'Authorization': 'Bearer abcdefghijklmnopqrstuvwxyz'}", "{'X-Api-Key': '***', 'Authorization': 'Bearer abcdef...wxyz'}"},
		{"non-secret kept", `{"tokens_used": 15, "name": "x"}`, `{"tokens_used": 15, "name": "x"}`},
		{"ambiguous short kept", `{"max_tokens": "100"}`, `{"max_tokens": "100"}`},
	})
}

func TestTelegram(t *testing.T) {
	tok := "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0"
	runRedact(t, []redactCase{
		{"bot token", "123456789:" + tok, "123456789:***"},
		{"bot prefix", "https://api.telegram.org/bot123456789:" + tok + "/getMe", "https://api.telegram.org/bot123456789:***/getMe"},
		{"7 digits kept", "1234567:" + tok, "1234567:" + tok},
		{"short token kept", "123456789:short", "123456789:short"},
		{"time kept", "12:34:56", "12:34:56"},
	})
}

func TestPEM(t *testing.T) {
	key := "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\nabc+/=\n-----END RSA PRIVATE KEY-----"
	runRedact(t, []redactCase{
		{"rsa", "before\n" + key + "\nafter", "before\n[REDACTED PRIVATE KEY]\nafter"},
		{"openssh", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Bl\n-----END OPENSSH PRIVATE KEY-----", "[REDACTED PRIVATE KEY]"},
		{"pkcs8", "-----BEGIN PRIVATE KEY-----\nMC4C\n-----END PRIVATE KEY-----", "[REDACTED PRIVATE KEY]"},
		{"two keys", key + "\n" + key, "[REDACTED PRIVATE KEY]\n[REDACTED PRIVATE KEY]"},
		{"certificate kept", "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----", "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----"},
		{"public key kept", "-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----", "-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----"},
		{"unterminated masks its body", "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEE\nIGx0\n\nnext line", "[REDACTED PRIVATE KEY]\n\nnext line"},
	})
}

func TestURLs(t *testing.T) {
	runRedact(t, []redactCase{
		{"postgres", "postgres://user:secretpw@localhost/db", "postgres://user:***@localhost/db"},
		{"postgresql upper", "POSTGRESQL://u:p@h", "POSTGRESQL://u:***@h"},
		{"mysql", "mysql://root:toor@db:3306/x", "mysql://root:***@db:3306/x"},
		{"mongodb+srv", "mongodb+srv://u:pw@cluster0.x.net", "mongodb+srv://u:***@cluster0.x.net"},
		{"redis empty user", "redis://:pass1234@cache:6379", "redis://:***@cache:6379"},
		{"rediss", "rediss://default:pw@h", "rediss://default:***@h"},
		{"amqp", "amqp://guest:guest@rabbit//", "amqp://guest:***@rabbit//"},
		{"sqlalchemy driver", "postgresql+psycopg://u:pw@h/db", "postgresql+psycopg://u:***@h/db"},
		{"f-string template kept", "postgresql://{user}:{password}@{host}", "postgresql://{user}:{password}@{host}"},
		{"no password kept", "postgres://localhost:5432/db", "postgres://localhost:5432/db"},
		{"bare token https", "https://abcdefgh12345678@github.com/o/r", "https://***@github.com/o/r"},
		{"bare token long", "git://abcdefghijklmnopqrstuvwxyz@host", "git://abcdef...wxyz@host"},
		{"user:pass web passes", "https://user:pass@example.com", "https://user:pass@example.com"},
		{"short user passes", "ssh://git@github.com/x", "ssh://git@github.com/x"},
		{"email in query passes", "https://x.com/?q=user@example.com", "https://x.com/?q=user@example.com"},
	})
}

func TestJWT(t *testing.T) {
	jwt := "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
	runRedact(t, []redactCase{
		{"three parts", "token " + jwt + " end", "token eyJhbG...sR8U end"},
		{"one part", "eyJhbGciOiJIUzI1", "***"},
		{"too short", "eyJhbGciOi", "eyJhbGciOi"},
		{"glued still masked (no boundary, as reference)", "xeyJhbGciOiJIUzI1NiJ9x", "xeyJhbG...iJ9x"},
	})
}

// Exact values are masked even with pattern redaction off, even split
// across the output of two writers, and with overlapping secrets.
func TestExactValues(t *testing.T) {
	secret := "Zq9-opaque-secret-value"
	p := NewPipeline(OutputConfig{DisablePatternRedaction: true})
	f := p.Filter([]string{secret, "short", "opaque-secret"})
	half1, half2 := secret[:10], secret[10:]
	joined := "python printed " + half1 + "" + half2 + " (subprocess)" // pool joins both streams
	if got := f.Clean(joined); got != "python printed *** (subprocess)" {
		t.Errorf("split value: %q", got)
	}
	if got := f.Clean("x" + secret + secret + "y"); got != "x***y" {
		t.Errorf("adjacent: %q", got)
	}
	if got := f.Clean("only opaque-secret here"); got != "only *** here" {
		t.Errorf("overlap member: %q", got)
	}
	if got := f.Clean("short is too short to mask"); got != "short is too short to mask" {
		t.Errorf("short: %q", got)
	}
	// Patterns are off: a token stays.
	if got := f.Clean("ghp_" + body30); got != "ghp_"+body30 {
		t.Errorf("patterns not off: %q", got)
	}
	// ANSI inside the secret is stripped first, so it cannot hide it.
	if got := f.Clean("Zq9-opaque-\x1b[0msecret-value"); got != "***" {
		t.Errorf("ansi split: %q", got)
	}
}

// Secrets holding '*' or '.' cannot be re-created by a mask.
func TestExactValuesRecurse(t *testing.T) {
	f := NewPipeline(OutputConfig{}).Filter([]string{"a***b***", "x.y.z.w.v"})
	for _, in := range []string{"a***b***b***", "aa***b***b***b***", "x.y.z.w.x.y.z.w.v.v"} {
		got := f.Clean(in)
		if strings.Contains(got, "a***b***") || strings.Contains(got, "x.y.z.w.v") {
			t.Errorf("Clean(%q) = %q still holds a secret", in, got)
		}
	}
}

func TestMaskToken(t *testing.T) {
	cases := map[string]string{
		"":                         "***",
		"short":                    "***",
		"exactly17characte":        "***",
		"exactly18character":       "exactl...cter",
		"ünïcödé-ünïcödé-ünïcödé":  "ünïcöd...cödé",
		"ab\x00cdefghijklmnopqrst": "abcdef...qrst",
	}
	for in, want := range cases {
		if got := maskToken(in); got != want {
			t.Errorf("maskToken(%q) = %q, want %q", in, got, want)
		}
		if got := maskToken(in); !isMask(got) {
			t.Errorf("maskToken(%q) = %q is not recognised as a mask", in, got)
		}
	}
}

// One text that makes every pass rewrite: the buffer-reusing Clean equals
// the allocate-per-pass one.
func TestCleanEveryPassRewrites(t *testing.T) {
	f := NewPipeline(OutputConfig{}).Filter([]string{"exactSecretValue1"})
	in := "\x1b[31mexactSecretValue1\x1b[0m ghp_" + body30 + " DB_PASSWORD=x x-api-key: k\n" +
		"-----BEGIN PRIVATE KEY-----\nMC4C\n-----END PRIVATE KEY-----\neyJhbGciOiJIUzI1NiJ9 postgres://u:p@h"
	want := "*** ghp_ab...0123 DB_PASSWORD=*** x-api-key: ***\n[REDACTED PRIVATE KEY]\neyJhbG...NiJ9 postgres://u:***@h"
	if got := f.Clean(in); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if got := cleanNoReuse(f, in); got != want {
		t.Errorf("no-reuse got %q", got)
	}
}

func TestZhipuCandidatesOnHexBlob(t *testing.T) {
	key := strings.Repeat("0123456789abcdef", 2) + ".AbCdEfGhIjKlMnOpQr"
	for _, pad := range []int{0, 1, 15, 16, 17, 31} {
		in := strings.Repeat(" ", pad) + key + " " + strings.Repeat("deadbeef", 100) + ". " + key
		want := strings.Repeat(" ", pad) + maskToken(key) + " " + strings.Repeat("deadbeef", 100) + ". " + maskToken(key)
		if got := redactPrefixTokens(in); got != want {
			t.Errorf("pad %d: got %q", pad, got)
		}
	}
}

// Clean results alias reused scratch buffers only until returned: results
// kept across later (and concurrent) Clean calls must not change.
func TestCleanResultsStayIntact(t *testing.T) {
	f := NewPipeline(OutputConfig{}).Filter([]string{"exactSecretValue1"})
	inputs := make([]string, 64)
	for i := range inputs {
		inputs[i] = fmt.Sprintf("\x1b[3%dm%d exactSecretValue1 ghp_%s%02d DB_PASSWORD=p%d\x1b[0m\n", i%8, i, body30, i, i) +
			strings.Repeat(fmt.Sprintf("line %d of filler text\n", i), i*40)
	}
	results := make([]string, len(inputs))
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < len(inputs); i += 4 {
				results[i] = f.Clean(inputs[i])
			}
		}(w)
	}
	wg.Wait()
	for i := range inputs {
		_ = f.Clean(inputs[(i+7)%len(inputs)]) // churn the pool
	}
	for i, in := range inputs {
		if want := cleanNoReuse(f, in); results[i] != want {
			t.Fatalf("result %d changed after later Clean calls", i)
		}
	}
}

// specTokens are the provider token prefixes of parity §2 (and the
// reference's others), each with one literal token at least as long as its
// minimum and its literal mask (first 6 + ... + last 4), and one token one
// character short of the minimum, which must pass unchanged ("": none).
var specTokens = []struct{ token, masked, short string }{
	{"sk-Ab3De6Gh9Jk2Mn5Pq8St", "sk-Ab3...q8St", "sk-Ab3De6Gh9"},
	{"ghp_Ab3De6Gh9Jk2Mn5Pq8St", "ghp_Ab...q8St", "ghp_Ab3De6Gh9"},
	{"github_pat_Ab3De6Gh9Jk2Mn5Pq8St", "github...q8St", "github_pat_Ab3De6Gh9"},
	{"gho_Ab3De6Gh9Jk2Mn5Pq8St", "gho_Ab...q8St", "gho_Ab3De6Gh9"},
	{"ghu_Ab3De6Gh9Jk2Mn5Pq8St", "ghu_Ab...q8St", "ghu_Ab3De6Gh9"},
	{"ghs_Ab3De6Gh9Jk2Mn5Pq8St", "ghs_Ab...q8St", "ghs_Ab3De6Gh9"},
	{"ghr_Ab3De6Gh9Jk2Mn5Pq8St", "ghr_Ab...q8St", "ghr_Ab3De6Gh9"},
	{"xapp-1-Ab3De6Gh9Jk2Mn5Pq8St", "xapp-1...q8St", ""},
	{"xoxb-Ab3De6Gh9Jk2Mn5Pq8St", "xoxb-A...q8St", "xoxb-Ab3De6Gh9"},
	{"xoxa-Ab3De6Gh9Jk2Mn5Pq8St", "xoxa-A...q8St", "xoxa-Ab3De6Gh9"},
	{"xoxp-Ab3De6Gh9Jk2Mn5Pq8St", "xoxp-A...q8St", "xoxp-Ab3De6Gh9"},
	{"xoxr-Ab3De6Gh9Jk2Mn5Pq8St", "xoxr-A...q8St", "xoxr-Ab3De6Gh9"},
	{"xoxs-Ab3De6Gh9Jk2Mn5Pq8St", "xoxs-A...q8St", "xoxs-Ab3De6Gh9"},
	{"AIzaAb3De6Gh9Jk2Mn5Pq8St1Vw4Yz7Bc0", "AIzaAb...7Bc0", "AIzaAb3De6Gh9Jk2Mn5Pq8St1Vw4Yz7Bc"},
	{"pplx-Ab3De6Gh9Jk2Mn5Pq8St", "pplx-A...q8St", "pplx-Ab3De6Gh9"},
	{"fal_Ab3De6Gh9Jk2Mn5Pq8St", "fal_Ab...q8St", "fal_Ab3De6Gh9"},
	{"fc-Ab3De6Gh9Jk2Mn5Pq8St", "fc-Ab3...q8St", "fc-Ab3De6Gh9"},
	{"bb_live_Ab3De6Gh9Jk2Mn5Pq8St", "bb_liv...q8St", "bb_live_Ab3De6Gh9"},
	{"gAAAAAb3De6Gh9Jk2Mn5Pq8St", "gAAAAA...q8St", "gAAAAAb3De6Gh9Jk2Mn5Pq8S"},
	{"AKIAABCDEFGHJKLMNPQR", "AKIAAB...NPQR", "AKIAABCDEFGHJKLMNPQ"},
	{"sk_live_Ab3De6Gh9Jk2Mn5Pq8St", "sk_liv...q8St", ""},
	{"sk_test_Ab3De6Gh9Jk2Mn5Pq8St", "sk_tes...q8St", ""},
	{"rk_live_Ab3De6Gh9Jk2Mn5Pq8St", "rk_liv...q8St", "rk_live_Ab3De6Gh9"},
	{"SG.Ab3De6Gh9Jk2Mn5Pq8St", "SG.Ab3...q8St", "SG.Ab3De6Gh9"},
	{"hf_Ab3De6Gh9Jk2Mn5Pq8St", "hf_Ab3...q8St", "hf_Ab3De6Gh9"},
	{"r8_Ab3De6Gh9Jk2Mn5Pq8St", "r8_Ab3...q8St", "r8_Ab3De6Gh9"},
	{"npm_Ab3De6Gh9Jk2Mn5Pq8St", "npm_Ab...q8St", "npm_Ab3De6Gh9"},
	{"pypi-Ab3De6Gh9Jk2Mn5Pq8St", "pypi-A...q8St", "pypi-Ab3De6Gh9"},
	{"dop_v1_Ab3De6Gh9Jk2Mn5Pq8St", "dop_v1...q8St", "dop_v1_Ab3De6Gh9"},
	{"doo_v1_Ab3De6Gh9Jk2Mn5Pq8St", "doo_v1...q8St", "doo_v1_Ab3De6Gh9"},
	{"am_org_Ab3De6Gh9Jk2Mn5Pq8St", "am_org...q8St", "am_org_Ab3De6Gh9Jk2Mn5Pq8S"},
	{"am_Ab3De6Gh9Jk2Mn5Pq8St", "am_Ab3...q8St", "am_Ab3De6Gh9Jk2Mn5Pq8S"},
	{"sk_Ab3De6Gh9Jk2Mn5Pq8St", "sk_Ab3...q8St", "sk_Ab3De6Gh9"},
	{"tvly-Ab3De6Gh9Jk2Mn5Pq8St", "tvly-A...q8St", "tvly-Ab3De6Gh9"},
	{"exa_Ab3De6Gh9Jk2Mn5Pq8St", "exa_Ab...q8St", "exa_Ab3De6Gh9"},
	{"gsk_Ab3De6Gh9Jk2Mn5Pq8St", "gsk_Ab...q8St", "gsk_Ab3De6Gh9"},
	{"syt_Ab3De6Gh9Jk2Mn5Pq8St", "syt_Ab...q8St", "syt_Ab3De6Gh9"},
	{"retaindb_Ab3De6Gh9Jk2Mn5Pq8St", "retain...q8St", "retaindb_Ab3De6Gh9"},
	{"hsk-Ab3De6Gh9Jk2Mn5Pq8St", "hsk-Ab...q8St", "hsk-Ab3De6Gh9"},
	{"mem0_Ab3De6Gh9Jk2Mn5Pq8St", "mem0_A...q8St", "mem0_Ab3De6Gh9"},
	{"brv_Ab3De6Gh9Jk2Mn5Pq8St", "brv_Ab...q8St", "brv_Ab3De6Gh9"},
	{"xai-Ab3De6Gh9Jk2Mn5Pq8St1Vw4Yz7Bc0", "xai-Ab...7Bc0", "xai-Ab3De6Gh9Jk2Mn5Pq8St1Vw4Yz7Bc"},
	{"ntn_Ab3De6Gh9Jk2Mn5Pq8St", "ntn_Ab...q8St", "ntn_Ab3De6Gh9"},
	{"fw-Ab3De6Gh9Jk2Mn5Pq8St1Vw4Yz7Bc0", "fw-Ab3...7Bc0", "fw-Ab3De6Gh9Jk2Mn5Pq8St1Vw4Yz7Bc"},
	{"fw_Ab3De6Gh9Jk2Mn5Pq8St1Vw4Yz7Bc0", "fw_Ab3...7Bc0", "fw_Ab3De6Gh9Jk2Mn5Pq8St1Vw4Yz7Bc"},
	{"fpk_Ab3De6Gh9Jk2Mn5Pq8St1Vw4Yz7Bc0", "fpk_Ab...7Bc0", "fpk_Ab3De6Gh9Jk2Mn5Pq8St1Vw4Yz7Bc"},
	{"glpat-Ab3De6Gh9Jk2Mn5Pq8St", "glpat-...q8St", "glpat-Ab3De6Gh9"},
	{"gloas-Ab3De6Gh9Jk2Mn5Pq8St", "gloas-...q8St", "gloas-Ab3De6Gh9"},
	{"gldt-Ab3De6Gh9Jk2Mn5Pq8St", "gldt-A...q8St", "gldt-Ab3De6Gh9"},
	{"glrt-Ab3De6Gh9Jk2Mn5Pq8St", "glrt-A...q8St", "glrt-Ab3De6Gh9"},
	{"glrtr-Ab3De6Gh9Jk2Mn5Pq8St", "glrtr-...q8St", "glrtr-Ab3De6Gh9"},
	{"glcbt-Ab3De6Gh9Jk2Mn5Pq8St", "glcbt-...q8St", "glcbt-Ab3De6Gh9"},
	{"glptt-Ab3De6Gh9Jk2Mn5Pq8St", "glptt-...q8St", "glptt-Ab3De6Gh9"},
	{"glft-Ab3De6Gh9Jk2Mn5Pq8St", "glft-A...q8St", "glft-Ab3De6Gh9"},
	{"glimt-Ab3De6Gh9Jk2Mn5Pq8St", "glimt-...q8St", "glimt-Ab3De6Gh9"},
	{"glagent-Ab3De6Gh9Jk2Mn5Pq8St", "glagen...q8St", "glagent-Ab3De6Gh9"},
	{"glsoat-Ab3De6Gh9Jk2Mn5Pq8St", "glsoat...q8St", "glsoat-Ab3De6Gh9"},
	{"glffct-Ab3De6Gh9Jk2Mn5Pq8St", "glffct...q8St", "glffct-Ab3De6Gh9"},
	{"glwt-Ab3De6Gh9Jk2Mn5Pq8St", "glwt-A...q8St", "glwt-Ab3De6Gh9"},
	{"GR1348941Ab3De6Gh9Jk2Mn5Pq8St", "GR1348...q8St", "GR1348941Ab3De6Gh9"},
	{"pk-lf-Ab3De6Gh9Jk2Mn5Pq8St", "pk-lf-...q8St", "pk-lf-Ab3De6G"},
}
