//go:build integration && linux

package integration

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kernpool/kernpool/internal/testenv"
)

// tenantCase is one attempt by a tenant ("mallory") on what another
// ("alice") left in a place that used to be shared: alice's cell plants
// something (and proves it works for her), mallory's cell looks for it.
// Each prints lines; want are mallory's exact lines.
type tenantCase struct {
	name    string
	plant   string // alice's cell; must print "planted"
	attempt string // mallory's cell
	want    string
}

// The port and names are fixed: each case runs in its own daemon, and in
// the host's namespaces a collision would only make the test fail, never
// pass.
func tenantCases() []tenantCase {
	return []tenantCase{
		{name: "tmp_and_shm_files", plant: `
for d in ('/tmp', '/var/tmp', '/dev/shm'):
    open(d + '/alice-secret', 'w').write('s')
    assert open(d + '/alice-secret').read() == 's'
print('planted')`, attempt: `
import os
for d in ('/tmp', '/var/tmp', '/dev/shm'):
    print(d, os.path.exists(d + '/alice-secret'), [n for n in os.listdir(d) if 'alice' in n])`,
			want: "/tmp False []\n/var/tmp False []\n/dev/shm False []"},
		{name: "loopback_listener", plant: `
import socket
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(('127.0.0.1', 47123)); srv.listen(8)
c = socket.create_connection(('127.0.0.1', 47123), timeout=5); c.close()
print('planted')`, attempt: `
import socket
try:
    socket.create_connection(('127.0.0.1', 47123), timeout=5); print('CONNECTED')
except OSError as e:
    print(type(e).__name__)`, want: "ConnectionRefusedError"},
		{name: "abstract_unix_listener", plant: `
import socket
srv = socket.socket(socket.AF_UNIX); srv.bind('\0kernpool-it-alice'); srv.listen(8)
c = socket.socket(socket.AF_UNIX); c.connect('\0kernpool-it-alice'); c.close()
print('planted')`, attempt: `
import socket
try:
    s = socket.socket(socket.AF_UNIX); s.connect('\0kernpool-it-alice'); print('CONNECTED')
except OSError as e:
    print(type(e).__name__)`, want: "ConnectionRefusedError"},
		{name: "sysv_shared_memory", plant: `
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
shmid = libc.shmget(0x4b50_0001, 1 << 20, 0o1000 | 0o666)
assert shmid >= 0, ctypes.get_errno()
assert '4b500001' in open('/proc/sysvipc/shm').read().replace(' ', '') or True
print('planted')`, attempt: `
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
r = libc.shmget(0x4b50_0001, 0, 0)
print(r, os.strerror(ctypes.get_errno()) if r < 0 else 'FOUND')
print(str(0x4b500001) in open('/proc/sysvipc/shm').read())`, want: "-1 No such file or directory\nFalse"},
	}
}

// TestTenantsShareNothing: each case in its own daemon, two tenants.
func TestTenantsShareNothing(t *testing.T) {
	requireDaemon(t)
	for _, tc := range tenantCases() {
		t.Run(tc.name, func(t *testing.T) {
			d := StartDaemon(t, capped())
			if r := d.Run(t, "alice", tc.plant); strings.TrimSpace(r.Output) != "planted" {
				t.Fatalf("alice could not plant (the test proves nothing): %s %q %q", r.Status, r.Output, r.Error)
			}
			r := d.Run(t, "mallory", tc.attempt)
			if got := strings.TrimSpace(r.Output); got != tc.want {
				t.Errorf("mallory saw %q, want %q (status %s, error %q)", got, tc.want, r.Status, r.Error)
			}
			if tc.name == "sysv_shared_memory" {
				// Not in the host's ipc namespace either.
				if b, _ := os.ReadFile("/proc/sysvipc/shm"); strings.Contains(string(b), strconv.Itoa(0x4b500001)) {
					t.Errorf("alice's SysV segment is visible in the host's /proc/sysvipc/shm")
				}
			}
			shutdownAndCheck(t, d, "alice", "mallory")
		})
	}
}

// kernelCase is one thing a kernel tries alone; want is its exact output.
type kernelCase struct {
	name, code, want string
}

// initName is pid 1's argv[0] in a running kernel: on x86-64 the init
// execs into its reaper once the interpreter runs (docs/design.md, "The
// init step"); elsewhere it stays the Go init.
func initName() string {
	if runtime.GOARCH == "amd64" {
		return "kernpool-reaper"
	}
	return "kernpool-init"
}

func kernelCases() []kernelCase {
	return []kernelCase{
		// In a network namespace with only lo there is no route anywhere:
		// the connect fails at once, and no packet leaves.
		{name: "no_route_out", code: `
import errno, socket
s = socket.socket(); s.settimeout(5)
print(errno.errorcode.get(s.connect_ex(('10.255.255.1', 9)), 'CONNECTED'))
print(sorted(n for _, n in socket.if_nameindex()))`, want: "ENETUNREACH\n['lo']"},
		{name: "denied_syscalls", code: `
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
def call(nr, *args):
    r = libc.syscall(nr, *args)
    return errno.errorcode.get(ctypes.get_errno(), '?') if r < 0 else 'ALLOWED'
CLONE_NEWUSER = 0x10000000
print('unshare(CLONE_NEWUSER)', 'ALLOWED' if libc.unshare(CLONE_NEWUSER) == 0 else errno.errorcode[ctypes.get_errno()])
print('keyctl', call(250, 0, -3, 0))  # KEYCTL_GET_KEYRING_ID, session keyring
print('add_key', call(248, b'user', b'k', b'v', 1, -3))
print('bpf', call(321, 0, 0, 0))
print('perf_event_open', call(298, 0, 0, -1, -1, 0))
print('userfaultfd', call(323, 0))
print('io_uring_setup', call(425, 1, 0))
print('ptrace', call(101, 16, 1, 0, 0))  # PTRACE_ATTACH to the init
print('process_vm_readv', call(310, 1, 0, 0, 0, 0, 0))
print('mount', call(165, b'none', b'/tmp', b'tmpfs', 0, 0))
print('clone3', call(435, 0, 0))
import subprocess; print('fork+exec', subprocess.run(['/bin/true']).returncode)`,
			want: "unshare(CLONE_NEWUSER) EPERM\nkeyctl EPERM\nadd_key EPERM\nbpf EPERM\nperf_event_open EPERM\nuserfaultfd EPERM\n" +
				"io_uring_setup EPERM\nptrace EPERM\nprocess_vm_readv EPERM\nmount EPERM\nclone3 ENOSYS\nfork+exec 0"},
		// Only the kernel's own processes: its init (1) and the runner (and
		// the runner's watchdog); the host's are not even numbered here.
		{name: "proc_shows_own_processes", code: `
import os
pids = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())
cmd = lambda p: open('/proc/%d/cmdline' % p, 'rb').read().split(b'\0')[0].decode()
print(pids[0], cmd(1), os.getppid(), max(pids) < 64, len(pids) <= 4)`, want: "1 " + initName() + " 1 True True"},
		{name: "umask_hostname_tmpfs", code: `
import os, socket
print(oct(os.umask(0o22)), socket.gethostname())
st = os.statvfs('/dev/shm'); print(st.f_blocks * st.f_frsize <= 64 << 20)
print(sorted(os.listdir('/tmp')) == [os.environ['TMPDIR'].split('/')[2]] if os.environ['TMPDIR'].startswith('/tmp/') else 'state dir not under /tmp')`,
			want: "0o77 kernpool\nTrue\nTrue"},
	}
}

// TestKernelConfinement: each case in one daemon (state dir under /tmp,
// the harness's default, so the staging dir is bound back into the
// kernel's private /tmp).
func TestKernelConfinement(t *testing.T) {
	requireDaemon(t)
	d := StartDaemon(t, capped())
	if !strings.HasPrefix(d.State, "/tmp/") {
		t.Fatalf("state dir %s: the harness should keep it under /tmp", d.State)
	}
	for _, tc := range kernelCases() {
		t.Run(tc.name, func(t *testing.T) {
			r := d.Run(t, tc.name, tc.code)
			if got := strings.TrimSpace(r.Output); got != tc.want {
				t.Errorf("got %q, want %q (status %s, error %q)", got, tc.want, r.Status, r.Error)
			}
		})
	}
	owners := make([]string, 0, len(kernelCases()))
	for _, tc := range kernelCases() {
		owners = append(owners, tc.name)
	}
	shutdownAndCheck(t, d, owners...)
}

// shmemKiB reads Shmem from /proc/meminfo: tmpfs and SysV pages host-wide.
func shmemKiB(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Shmem:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			return n
		}
	}
	t.Fatal("no Shmem in /proc/meminfo")
	return 0
}

// TestShmCountsAgainstMemoryCap: with tmp_size above the memory cap,
// filling /dev/shm can only end at the memory cap (OOM), which proves the
// pages are charged to the kernel; once it is gone nothing of them stays.
func TestShmCountsAgainstMemoryCap(t *testing.T) {
	requireDaemon(t)
	d := StartDaemon(t, Opts{MemoryMax: "64MiB", PidsMax: 64, Config: "profile \"default\" {\n  memory_max = \"64MiB\"\n  tmp_size = \"512MiB\"\n}\n"})
	before := shmemKiB(t)
	r := d.RunReq(t, ExecReq{Owner: "hog", Timeout: "60s", Code: `
chunk = b'x' * (1 << 20)
with open('/dev/shm/hog', 'wb') as f:
    for i in range(150):
        f.write(chunk); f.flush()
print('survived')`})
	if strings.Contains(r.Output, "survived") || !r.Kernel.OOMKilled {
		t.Fatalf("150 MiB in /dev/shm under a 64 MiB cap: status %s, oom %v, output %q, error %q", r.Status, r.Kernel.OOMKilled, r.Output, r.Error)
	}
	if _, err := os.Stat("/dev/shm/hog"); err == nil {
		t.Errorf("the kernel's /dev/shm file is in the host's /dev/shm")
	}
	// The tmpfs goes with the kernel's mount namespace, after its last
	// process; allow 32 MiB of unrelated host noise.
	deadline := time.Now().Add(scaled(testenv.Patience))
	for {
		now := shmemKiB(t)
		if now < before+32<<10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("host Shmem %d KiB after the kernel died, %d KiB before: its /dev/shm pages were not freed", now, before)
		}
		time.Sleep(50 * time.Millisecond)
	}
	assertServes(t, d, "hog")
	shutdownAndCheck(t, d, "hog")
}

// TestTmpSizeCapsTmpfs: a write past tmp_size (below the memory cap) ends
// with ENOSPC, not with memory.
func TestTmpSizeCapsTmpfs(t *testing.T) {
	requireDaemon(t)
	d := StartDaemon(t, Opts{MemoryMax: "256MiB", PidsMax: 64, Config: "profile \"default\" {\n  memory_max = \"256MiB\"\n  tmp_size = \"8MiB\"\n}\n"})
	r := d.Run(t, "filler", `
import errno
try:
    with open('/tmp/fill', 'wb') as f:
        for i in range(32):
            f.write(b'x' * (1 << 20)); f.flush()
    print('WROTE 32 MiB')
except OSError as e:
    print(errno.errorcode[e.errno])`)
	if got := strings.TrimSpace(r.Output); got != "ENOSPC" {
		t.Errorf("got %q, want ENOSPC (status %s, error %q)", got, r.Status, r.Error)
	}
	shutdownAndCheck(t, d, "filler")
}

// hostPid maps a pid a kernel printed (in its own pid namespace) to the
// host's, through NSpid of this daemon's kernel processes; 0 if none.
func hostPid(d *Daemon, nsPid int) int {
	for _, pid := range d.scan(false).pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "NSpid:"); ok {
				f := strings.Fields(rest)
				if len(f) > 1 && f[len(f)-1] == strconv.Itoa(nsPid) {
					return pid
				}
			}
		}
	}
	return 0
}
