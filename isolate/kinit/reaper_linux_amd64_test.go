package kinit

import (
	"bufio"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestReaperCode: the embedded machine code is what reaper_amd64.asm
// assembles to, so that reviewing the source reviews the bytes.
func TestReaperCode(t *testing.T) {
	for _, tool := range []string{"as", "objcopy"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s (GNU binutils) to reassemble reaper_amd64.asm: %v", tool, err)
		}
	}
	dir := t.TempDir()
	obj, bin := filepath.Join(dir, "r.o"), filepath.Join(dir, "r.bin")
	for _, args := range [][]string{
		{"as", "--64", "-o", obj, "reaper_amd64.asm"},
		{"objcopy", "-O", "binary", "-j", ".text", obj, bin},
	} {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	want, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(reaperCode, want) {
		var lit strings.Builder
		for i, b := range want {
			if i%16 == 0 {
				lit.WriteString("\n\t")
			}
			fmt.Fprintf(&lit, "0x%02x, ", b)
		}
		t.Fatalf("reaperCode (%d bytes) is not reaper_amd64.asm assembled (%d bytes); its bytes:%s", len(reaperCode), len(want), lit.String())
	}
}

// TestReaperImage: the ELF around the code is one read+execute segment
// entered at the code's first byte, and a non-executable stack.
func TestReaperImage(t *testing.T) {
	img := reaperImage()
	f, err := elf.NewFile(bytes.NewReader(img))
	if err != nil {
		t.Fatal(err)
	}
	if f.Class != elf.ELFCLASS64 || f.Data != elf.ELFDATA2LSB || f.Type != elf.ET_DYN || f.Machine != elf.EM_X86_64 {
		t.Fatalf("header %+v", f.FileHeader)
	}
	if len(f.Progs) != 2 {
		t.Fatalf("%d program headers, want PT_LOAD and PT_GNU_STACK", len(f.Progs))
	}
	load, stack := f.Progs[0], f.Progs[1]
	if load.Type != elf.PT_LOAD || load.Flags != elf.PF_R|elf.PF_X || load.Off != 0 || load.Vaddr != 0 ||
		load.Filesz != uint64(len(img)) || load.Memsz != load.Filesz {
		t.Fatalf("load segment %+v for a %d-byte file", load.ProgHeader, len(img))
	}
	if stack.Type != elf.PT_GNU_STACK || stack.Flags&elf.PF_X != 0 {
		t.Fatalf("stack segment %+v", stack.ProgHeader)
	}
	if entry := f.Entry; entry != uint64(len(img)-len(reaperCode)) || !bytes.Equal(img[entry:], reaperCode) {
		t.Fatalf("entry %#x: not the code's first byte", entry)
	}
}

// envReaperChild makes this test binary fork `sh -c <value>` and exec
// into the reaper (reaperHelper); status pipe on fd 3.
const envReaperChild = "KINIT_TEST_REAPER_CHILD"

// envReaperParent makes this test binary start the reaperHelper child
// with a parent-death signal, SIGTERM, and wait for it.
const envReaperParent = "KINIT_TEST_REAPER_PARENT"

// TestReaperParentHelper is the daemon stand-in of
// TestReaperKeepsParentDeathSignal (a child process).
func TestReaperParentHelper(t *testing.T) {
	script, ok := os.LookupEnv(envReaperParent)
	if !ok {
		return
	}
	cmd := reaperInitCmd(script)
	cmd.Stdout, cmd.ExtraFiles = os.Stdout, []*os.File{os.NewFile(StatusFD, "status")}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	t.Fatal("the reaper ended before its parent")
}

// init keeps this test binary's main goroutine on the main thread, as
// kinit's own init does in a real init: the reaper's stand-in runs there
// (TestMain), and no test's goroutine ever does.
func init() { runtime.LockOSThread() }

// TestMain runs reaperHelper instead of the tests when this binary was
// started as the reaper's stand-in init. Started with argv[0] = Arg0, the
// package's init kept the main goroutine on the main thread, as in a real
// init.
func TestMain(m *testing.M) {
	if script, ok := os.LookupEnv(envReaperChild); ok {
		fmt.Fprintln(os.Stderr, "reaper helper:", reaperHelper(script))
		os.Exit(3)
	}
	os.Exit(m.Run())
}

// reaperHelper does what the init does (on fd 3, the status pipe): it
// forks `sh -c script` on its locked main thread, then execs into the
// reaper, which becomes the shell's child subreaper in place of a pid 1.
// It returns only on failure.
func reaperHelper(script string) error {
	if _, err := unix.FcntlInt(StatusFD, unix.F_SETFD, unix.FD_CLOEXEC); err != nil { // as run does
		return err
	}
	file, err := newReaperFile()
	if err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return err
	}
	pid, err := syscall.ForkExec("/bin/sh", []string{"sh", "-c", script}, &syscall.ProcAttr{Files: []uintptr{0, 1, 2}})
	if err != nil {
		return err
	}
	_, err = execReaper(file, pid, Ready{Pid: pid}, false)
	return err
}

// reaperInitCmd is this binary started as the reaper's stand-in init
// over `sh -c script`.
func reaperInitCmd(script string) *exec.Cmd {
	cmd := exec.Command(os.Args[0])
	cmd.Args = []string{Arg0}
	cmd.Env = append(os.Environ(), envReaperChild+"="+script)
	return cmd
}

// TestExecReaperOnlyFromMainThread: off the main thread execReaper
// refuses (the exec would drop the parent-death signal) before it
// changes anything.
func TestExecReaperOnlyFromMainThread(t *testing.T) {
	done := make(chan error)
	go func() {
		runtime.LockOSThread() // the thread ends with this goroutine
		if unix.Gettid() == unix.Getpid() {
			done <- errors.New("the goroutine got the process's first thread, which init keeps for TestMain")
			return
		}
		file, err := newReaperFile()
		if err != nil {
			done <- err
			return
		}
		_, err = execReaper(file, 1, Ready{}, true)
		done <- err
	}()
	if err := <-done; err == nil || !strings.Contains(err.Error(), "main thread") {
		t.Fatalf("execReaper off the main thread: %v, want a refusal naming the main thread", err)
	}
}

// TestReaper runs the reaper over a shell: the ready line, then how the
// shell ended, on the status fd, and the same as its own exit code; a
// signal to the reaper reaches the shell.
func TestReaper(t *testing.T) {
	cases := []struct {
		name, script string
		signal       syscall.Signal // sent to the reaper once the shell printed "go"
		status       string
		exit         int
	}{
		{"exit code", "exit 7", 0, "exit 7", 7},
		{"exit code 255", "exit 255", 0, "exit 255", 255},
		{"exit 0 after orphans", "(sleep 0 &); (true &); exit 0", 0, "exit 0", 0},
		{"killed", "kill -9 $$", 0, "signal 9", 128 + 9},
		{"forwards SIGTERM", "trap 'exit 42' TERM; echo go; while :; do sleep 0.01; done", syscall.SIGTERM, "exit 42", 42},
		{"forwards SIGUSR1", "trap 'exit 43' USR1; echo go; while :; do sleep 0.01; done", syscall.SIGUSR1, "exit 43", 43},
		{"forwards SIGINT", "trap 'exit 44' INT; echo go; while :; do sleep 0.01; done", syscall.SIGINT, "exit 44", 44},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer status.Close()
			cmd := reaperInitCmd(c.script)
			cmd.ExtraFiles = []*os.File{w}
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			_ = w.Close()
			lines := bufio.NewReader(status)
			ready, _ := lines.ReadString('\n')
			r, _, _, _, _ := ParseStatus(ready)
			if r == nil || r.Supervisor != SupervisorReaper || r.Pid <= 0 {
				_ = cmd.Process.Kill()
				t.Fatalf("first status line %q, want a ready line with init=reaper", ready)
			}
			t.Cleanup(func() {
				if t.Failed() { // the shell may loop on, orphaned
					_ = syscall.Kill(r.Pid, syscall.SIGKILL)
				}
			})
			if c.signal != 0 {
				if line, _ := bufio.NewReader(out).ReadString('\n'); line != "go\n" {
					t.Fatalf("the shell printed %q", line)
				}
				if err := cmd.Process.Signal(c.signal); err != nil {
					t.Fatal(err)
				}
			}
			rest, _ := lines.ReadString('\n')
			_ = cmd.Wait()
			if rest != c.status+"\n" || cmd.ProcessState.ExitCode() != c.exit {
				t.Fatalf("status %q and exit code %d (%v), want %q and %d", rest, cmd.ProcessState.ExitCode(), cmd.ProcessState, c.status, c.exit)
			}
		})
	}
}

// TestReaperKeepsParentDeathSignal: the exec into the reaper keeps the
// init's parent-death signal (the credentials do not change), so a killed
// daemon still ends the kernel. Here the signal is SIGTERM, which the
// reaper forwards to a shell that exits 42 on it.
func TestReaperKeepsParentDeathSignal(t *testing.T) {
	status, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer status.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestReaperParentHelper$")
	cmd.Env = append(os.Environ(), envReaperParent+"=trap 'exit 42' TERM; echo go; while :; do sleep 0.01; done")
	cmd.ExtraFiles = []*os.File{w}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	_ = w.Close()
	lines := bufio.NewReader(status)
	ready, _ := lines.ReadString('\n')
	r, _, _, _, _ := ParseStatus(ready)
	if r == nil || r.Supervisor != SupervisorReaper {
		t.Fatalf("first status line %q, want a ready line with init=reaper", ready)
	}
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "go\n" {
		t.Fatalf("the shell printed %q", line)
	}
	if err := cmd.Process.Kill(); err != nil { // the reaper's parent
		t.Fatal(err)
	}
	_ = status.SetReadDeadline(time.Now().Add(time.Minute)) // a failure's bound
	rest, err := lines.ReadString('\n')
	if rest != "exit 42\n" {
		_ = syscall.Kill(r.Pid, syscall.SIGKILL)
		t.Fatalf("after its parent died the reaper reported %q (%v), want the shell's exit 42 on the forwarded SIGTERM", rest, err)
	}
}

// envReaperNoexec makes this test binary, as pid 1 of a pid namespace of
// its own, set that namespace's vm.memfd_noexec to 2 and try
// newReaperFile (TestReaperFileRefusedByMemfdNoexec).
const envReaperNoexec = "KINIT_TEST_REAPER_NOEXEC"

func TestReaperNoexecHelper(t *testing.T) {
	if os.Getenv(envReaperNoexec) == "" {
		return
	}
	// The sysctl is per pid namespace: this writes this namespace's.
	if err := os.WriteFile("/proc/sys/vm/memfd_noexec", []byte("2"), 0); err != nil {
		t.Fatal(err)
	}
	if fd, err := newReaperFile(); err != nil {
		// The fd too: run uses it without looking at the error, and only
		// a negative one keeps the init from exec'ing some open file.
		fmt.Println("refused:", fd, err)
		n, err := ReaperProbe()
		fmt.Println("probe:", n, err != nil)
		return
	}
	fmt.Println("created")
}

// TestReaperFileRefusedByMemfdNoexec: where executable memfds are
// forbidden (vm.memfd_noexec = 2) newReaperFile fails, and the init keeps
// its Go supervisor (TestInitBecomesReaper's go case covers that path)
// rather than exec a file it cannot: the fd it returns is -1, which
// execReaper refuses.
func TestReaperFileRefusedByMemfdNoexec(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: a pid namespace and its vm.memfd_noexec")
	}
	if _, err := os.Stat("/proc/sys/vm/memfd_noexec"); err != nil {
		t.Skipf("no vm.memfd_noexec (Linux before 6.3): %v", err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestReaperNoexecHelper$")
	cmd.Env = append(os.Environ(), envReaperNoexec+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "refused: -1 reaper: memfd_create") || !strings.Contains(string(out), "probe: 0 true") {
		t.Fatalf("newReaperFile under vm.memfd_noexec = 2: %v\n%s", err, out)
	}
}

// TestReaperProbe: where executable memfds are allowed, doctor's probe
// reports a reaper of some size and no error (refused, it reports the
// error: TestReaperFileRefusedByMemfdNoexec).
func TestReaperProbe(t *testing.T) {
	if b, err := os.ReadFile("/proc/sys/vm/memfd_noexec"); err == nil && strings.TrimSpace(string(b)) == "2" {
		t.Skip("vm.memfd_noexec = 2: executable memfds refused on this host")
	}
	if n, err := ReaperProbe(); err != nil || n <= 0 {
		t.Fatalf("ReaperProbe() = %d, %v; want a size and no error", n, err)
	}
}
