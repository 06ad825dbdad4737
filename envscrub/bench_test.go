package envscrub

import (
	"fmt"
	"strings"
	"testing"
)

// mixedOutput builds about size bytes of cell-like output: log lines,
// colored lines, JSON, key=value lines, URLs, and a few secrets.
func mixedOutput(size int) string {
	var b strings.Builder
	for i := 0; b.Len() < size; i++ {
		switch i % 10 {
		case 0:
			fmt.Fprintf(&b, "2026-11-29 15:%02d:%02d INFO worker[%d]: processed batch %d in 12.5ms\n", i%60, i%60, i%7, i)
		case 1:
			fmt.Fprintf(&b, "\x1b[32mPASSED\x1b[0m tests/test_mod_%d.py::test_case_%d\n", i%13, i)
		case 2:
			fmt.Fprintf(&b, "{\"id\": %d, \"name\": \"item-%d\", \"price\": %d.99, \"tags\": [\"a\", \"b\"]}\n", i, i, i%100)
		case 3:
			fmt.Fprintf(&b, "MAX_TOKENS=%d temperature=0.7 model=gpt-test BYPASS_CACHE=1\n", i%4096)
		case 4:
			fmt.Fprintf(&b, "Fetching https://example.com/api/v1/items?page=%d&limit=50 ... 200 OK\n", i)
		case 5:
			b.WriteString("The quick brown fox jumps over the lazy dog; lorem ipsum dolor sit amet, consectetur.\n")
		case 6:
			fmt.Fprintf(&b, "    x = np.array([%d, %d, %d]) # shape (3,)\n", i, i+1, i+2)
		case 7:
			if i%500 == 7 {
				b.WriteString("leaked: sk-proj-abcdefghijklmnopqrstuvwxyz0123 and ghp_0123456789abcdefghij0123 and hunter2hunter2\n")
			} else {
				fmt.Fprintf(&b, "Traceback line %d: File \"/usr/lib/python3/dist-packages/mod_%d.py\", line %d\n", i, i%9, i%300)
			}
		case 8:
			fmt.Fprintf(&b, "user_%d@example.com logged in from 10.0.%d.%d\n", i, i%255, (i*7)%255)
		default:
			fmt.Fprintf(&b, "%08x %08x %08x %08x\n", i*2654435761, i*40503, i*1103515245, i^0x5bd1e995)
		}
	}
	return b.String()
}

func BenchmarkPipeline1MiB(b *testing.B) {
	text := mixedOutput(1 << 20)
	f := NewPipeline(OutputConfig{}).Filter(benchSecrets())
	dir := testTempDir(b)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	for i := 0; i < b.N; i++ {
		// Finish includes truncation; the spill write is measured apart.
		if _, err := f.Finish(text, "", dir, -1); err == nil {
			b.Fatal("want the invalid-cell error that skips the spill write")
		}
	}
	// On a shared machine wall time includes waiting for a core; the
	// process CPU time per op (GC included) is the figure to compare.
	if cpu := processCPU() - cpu0; cpu > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}

func BenchmarkClean1MiB(b *testing.B) {
	text := mixedOutput(1 << 20)
	f := NewPipeline(OutputConfig{}).Filter(benchSecrets())
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		_ = f.Clean(text)
	}
}

func BenchmarkStages1MiB(b *testing.B) {
	text := mixedOutput(1 << 20)
	ex := newExactSet(benchSecrets())
	stages := []struct {
		name string
		fn   func(string) string
	}{
		{"ansi", StripANSI}, {"exact", ex.mask}, {"prefix", redactPrefixTokens},
		{"assign", redactAssignments}, {"colon", redactColon}, {"pem", redactPEM}, {"jwt", redactJWT},
	}
	for _, st := range stages {
		b.Run(st.name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			cpu0 := processCPU()
			for i := 0; i < b.N; i++ {
				_ = st.fn(text)
			}
			if cpu := processCPU() - cpu0; cpu > 0 {
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
			}
		})
	}
}

// benchSecrets is a realistic set of scrubbed values (20 secrets).
func benchSecrets() []string {
	s := []string{"hunter2hunter2"}
	for i := 0; i < 19; i++ {
		s = append(s, fmt.Sprintf("Zq%02dxV8pL3mN5bT7wR9yK1%02d", i, i*3))
	}
	return s
}

// adversarialInputs are outputs a hostile cell could print to burn the
// daemon's CPU if any pass were quadratic.
func adversarialInputs(n int) map[string]string {
	rep := func(unit string) string { return strings.Repeat(unit, n/len(unit)+1)[:n] }
	return map[string]string{
		"dsn-no-at":       rep("postgres://u:"),
		"osc-unterm":      rep("\x1b]x"),
		"dcs-unterm":      rep("\x1bPx"),
		"c1-osc-unterm":   rep("\u009dx"),
		"pem-no-end":      rep("-----BEGIN RSA PRIVATE KEY-----\n"),
		"pem-bad-ends":    "-----BEGIN RSA PRIVATE KEY-----\n" + rep("-----END X-----\n"),
		"assign-quotes":   rep("API_KEY='x "),
		"colons":          rep("a:"),
		"digits-colons":   rep("123456789:"),
		"headers":         rep("x-api-key:"),
		"auth-spaces":     "Authorization:" + rep(" "),
		"quoted-keys":     rep(`"API_KEY": "`),
		"token-prefixes":  rep("sk-a"),
		"fernet":          rep("gAAAAA="),
		"hex-dots":        rep("0123456789abcdef."),
		"akia":            rep("AKIA"),
		"jwt-starts":      rep("eyJ"),
		"escapes":         rep(`\nghp_`),
		"repeated-secret": rep("a"),
	}
}

func BenchmarkAdversarial256KiB(b *testing.B) {
	f := NewPipeline(OutputConfig{}).Filter([]string{strings.Repeat("a", 200), "hunter2hunter2"})
	for name, text := range adversarialInputs(256 << 10) {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for i := 0; i < b.N; i++ {
				_ = f.Clean(text)
			}
		})
	}
}

// The adversarial inputs also satisfy the fuzz properties.
func TestAdversarialInputs(t *testing.T) {
	f := NewPipeline(OutputConfig{}).Filter([]string{strings.Repeat("a", 200), "hunter2hunter2"})
	for name, text := range adversarialInputs(8 << 10) {
		out := f.Clean(text)
		if f.Clean(out) != out {
			t.Errorf("%s: not idempotent", name)
		}
		if strings.Contains(out, strings.Repeat("a", 200)) {
			t.Errorf("%s: secret survives", name)
		}
	}
}
