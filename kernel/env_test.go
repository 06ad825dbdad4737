package kernel

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kernpool/kernpool/internal/testenv"
)

func TestRunnerOnlyEnvInvisible(t *testing.T) {
	spec := baseSpec(t)
	spec.Env = append(spec.Env, "PYTHONPATH=/opt/extra", EnvCgroupKill+"=", "KEEP_ME=1")
	spec.Setup = func(staging string) ([]string, error) {
		return []string{EnvRPCToken + "=tok-secret", EnvRPCEndpoint + "=" + filepath.Join(staging, "rpc.sock"),
			EnvRlimits + "=core=0:0,nofile=512:512", EnvNoNewPrivs + "=1"}, nil
	}
	spec.Files = map[string][]byte{"kernpool_tools.py": []byte("VALUE = 'tools'\n")}
	k := startKernel(t, spec, "")
	r := mustExec(t, k, "import os, sys, resource, _kernpool_runtime as rt, kernpool_tools\n"+
		"print(sorted(n for n in os.environ if n.startswith('KERNPOOL')))\n"+
		"print(rt.rpc_token, os.path.basename(rt.rpc_endpoint), rt.kernel_id == os.environ['KERNPOOL_KERNEL_ID'])\n"+
		"print(kernpool_tools.VALUE, os.environ['PYTHONPATH'], os.environ['KEEP_ME'])\n"+
		"print(resource.getrlimit(resource.RLIMIT_NOFILE), resource.getrlimit(resource.RLIMIT_CORE))\n"+
		"print([l.split()[1] for l in open('/proc/self/status') if l.startswith('NoNewPrivs')])\n"+
		// The exec-time environment block outlives os.environ edits.
		"raw = open('/proc/self/environ', 'rb').read()\n"+
		"print(b'tok-secret' in raw, b'KERNPOOL_SENTINEL' in raw, b'KERNPOOL_RPC_TOKEN' in raw)")
	want := "['KERNPOOL_KERNEL_ID']\n" +
		"tok-secret rpc.sock True\n" +
		"tools " + k.StagingDir() + ":/opt/extra 1\n" +
		"(512, 512) (0, 0)\n" +
		"['1']\n" +
		"False False False\n"
	if r.Stdout != want {
		t.Fatalf("stdout:\n%s\nwant:\n%s", r.Stdout, want)
	}
	if strings.Contains(r.Stdout, k.sentinel) {
		t.Fatal("the sentinel reached a cell")
	}
}

func TestStagingAndTmpdir(t *testing.T) {
	k := startKernel(t, baseSpec(t), "")
	r := mustExec(t, k, "import os, tempfile\n"+
		"print(tempfile.gettempdir())\n"+
		"print(oct(os.stat(os.environ['TMPDIR']).st_mode & 0o777), oct(os.stat('.').st_mode & 0o777))\n"+
		"print(oct(os.stat('runner.py').st_mode & 0o777), os.getcwd())")
	want := filepath.Join(k.StagingDir(), "tmp") + "\n0o700 0o700\n0o600 " + k.StagingDir() + "\n"
	if r.Stdout != want {
		t.Fatalf("stdout %q, want %q", r.Stdout, want)
	}
	fi, err := os.Stat(filepath.Dir(k.StagingDir()))
	if err != nil || fi.Mode().Perm() != 0o711 {
		t.Fatalf("kernels dir: %v %v", fi.Mode(), err)
	}
}

func TestStartRefusesBadSpecs(t *testing.T) {
	testenv.RequirePython(t)
	good := baseSpec(t)
	cases := []struct {
		name   string
		mutate func(*Spec)
		want   string
	}{
		{"empty id", func(s *Spec) { s.ID = "" }, "invalid kernel id"},
		{"id with slash", func(s *Spec) { s.ID = "../x" }, "invalid kernel id"},
		{"relative interpreter", func(s *Spec) { s.Interpreter = "python3" }, "not an absolute path"},
		{"missing interpreter", func(s *Spec) { s.Interpreter = "/nonexistent/python3" }, "start /nonexistent/python3"},
		{"relative state dir", func(s *Spec) { s.StateDir = "state" }, "state dir"},
		{"bad file name", func(s *Spec) { s.Files = map[string][]byte{"../evil.py": nil} }, "invalid staging file name"},
		{"runner overwrite", func(s *Spec) { s.Files = map[string][]byte{"runner.py": nil} }, "invalid staging file name"},
		{"runner module overwrite", func(s *Spec) { s.Files = map[string][]byte{"_kernpool_display.py": nil} }, "invalid staging file name"},
		{"missing cwd", func(s *Spec) { s.Cwd = "/nonexistent-kernpool-cwd" }, "start"},
		{"relative cwd", func(s *Spec) { s.Cwd = "work" }, "cwd \"work\" is not an absolute path"},
		{"negative MaxFrameBytes", func(s *Spec) { s.MaxFrameBytes = -1 }, "negative MaxFrameBytes"},
		{"negative StdoutCap", func(s *Spec) { s.StdoutCap = -1 }, "negative MaxFrameBytes"},
		{"negative RawStdoutCap", func(s *Spec) { s.RawStdoutCap = -1 }, "negative MaxFrameBytes"},
		{"negative StderrCap", func(s *Spec) { s.StderrCap = -1 }, "negative MaxFrameBytes"},
		{"negative TailBytes", func(s *Spec) { s.TailBytes = -1 }, "negative MaxFrameBytes"},
		{"setup fails", func(s *Spec) {
			s.Setup = func(string) ([]string, error) { return nil, errors.New("no socket") }
		}, "setup: no socket"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			spec := good
			spec.StateDir = testTempDir(t)
			c.mutate(&spec)
			sb := &recordingSandbox{inner: NewProcessGroup()}
			spec.Sandbox = sb
			k, err := Start(context.Background(), spec)
			if err == nil {
				k.Kill()
				t.Fatal("Start succeeded")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q lacks %q", err, c.want)
			}
			if sb.releases() != 1 {
				t.Fatalf("sandbox released %d times, want 1", sb.releases())
			}
			if filepath.IsAbs(spec.StateDir) {
				if entries, _ := os.ReadDir(filepath.Join(spec.StateDir, "kernels")); len(entries) != 0 {
					t.Fatalf("staging dir left behind: %v", entries)
				}
			}
		})
	}
}

func TestStartRefusesExistingStaging(t *testing.T) {
	spec := baseSpec(t)
	k := startKernel(t, spec, "")
	if _, err := Start(context.Background(), spec); err == nil || !errors.Is(err, os.ErrExist) {
		t.Fatalf("second kernel with the same id: %v", err)
	}
	mustExec(t, k, "1") // the first kernel's staging is intact
	if _, err := os.Stat(filepath.Join(k.StagingDir(), runnerFile)); err != nil {
		t.Fatal(err)
	}
}
