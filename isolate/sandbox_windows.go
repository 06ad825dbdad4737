//go:build windows

package isolate

import (
	"fmt"
	"os/exec"
	"sync"
	"syscall"
	"unsafe"

	"github.com/kernpool/kernpool/kernel"
	"golang.org/x/sys/windows"
)

func platformReport(cfg Config) Report {
	r := baseReport(cfg)
	r.Kill = "Job Object (TerminateJobObject; KILL_ON_JOB_CLOSE when the daemon dies)"
	r.Lost = []string{"OOM-kill reporting", "per-kernel stats", "a user of their own", "rlimits", "no_new_privs"}
	r.Advice = []string{"run kernpool on Linux for cgroups, kernel uids and namespaces"}
	return r
}

// Sandbox confines one kernel in a Job Object with KILL_ON_JOB_CLOSE
// (memory and process-count limits where the profile sets them); it
// implements kernel.Sandbox.
type Sandbox struct {
	iso      *Isolator
	id       string
	mu       sync.Mutex
	job      windows.Handle
	limits   Limits // as set on the job
	released bool
}

var _ kernel.Sandbox = (*Sandbox)(nil)

func newSandbox(i *Isolator, id string, l Limits) (*Sandbox, error) {
	job, err := windows.CreateJobObject(nil, nil)
	if err != nil {
		return nil, fmt.Errorf("new sandbox %s: create job: %w", id, err)
	}
	s := &Sandbox{iso: i, id: id, job: job, limits: Limits{MemoryMax: l.MemoryMax, PidsMax: l.PidsMax}}
	var info windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION
	info.BasicLimitInformation.LimitFlags = windows.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
	if l.MemoryMax > 0 {
		info.BasicLimitInformation.LimitFlags |= windows.JOB_OBJECT_LIMIT_JOB_MEMORY
		info.JobMemoryLimit = uintptr(l.MemoryMax)
	}
	if l.PidsMax > 0 {
		info.BasicLimitInformation.LimitFlags |= windows.JOB_OBJECT_LIMIT_ACTIVE_PROCESS
		info.BasicLimitInformation.ActiveProcessLimit = uint32(l.PidsMax)
	}
	if _, err := windows.SetInformationJobObject(job, windows.JobObjectExtendedLimitInformation,
		uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info))); err != nil {
		_ = windows.CloseHandle(job)
		return nil, fmt.Errorf("new sandbox %s: set job limits: %w", id, err)
	}
	return s, nil
}

// Prepare starts the kernel in a new process group without a console window.
func (s *Sandbox) Prepare(cmd *exec.Cmd, staging string) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.CreationFlags |= windows.CREATE_NEW_PROCESS_GROUP
	return nil
}

// Started assigns the kernel to its job. Children it creates from now on
// are in the job too; nothing of the cell ran before this point because the
// runner waits for its first request on stdin.
func (s *Sandbox) Started(pid int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, err := windows.OpenProcess(windows.PROCESS_SET_QUOTA|windows.PROCESS_TERMINATE, false, uint32(pid))
	if err != nil {
		return fmt.Errorf("started %s: open process: %w", s.id, err)
	}
	defer windows.CloseHandle(h)
	if err := windows.AssignProcessToJobObject(s.job, h); err != nil {
		return fmt.Errorf("started %s: assign to job: %w", s.id, err)
	}
	return nil
}

// Kill terminates every process in the job. Idempotent.
func (s *Sandbox) Kill() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.released || s.job == 0 {
		return nil
	}
	if err := windows.TerminateJobObject(s.job, 1); err != nil {
		return fmt.Errorf("kill %s: %w", s.id, err)
	}
	return nil
}

// Release closes the job, which kills anything left (KILL_ON_JOB_CLOSE).
// Idempotent.
func (s *Sandbox) Release() (kernel.Verdict, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.released {
		return kernel.Verdict{}, nil
	}
	s.released = true
	if err := windows.CloseHandle(s.job); err != nil {
		return kernel.Verdict{}, fmt.Errorf("release %s: %w", s.id, err)
	}
	return kernel.Verdict{}, nil
}

// Stats are not read from jobs yet.
func (s *Sandbox) Stats() (kernel.Stats, error) { return kernel.Stats{}, nil }

// UID is -1: kernels run as the daemon's user.
func (s *Sandbox) UID() int { return -1 }

// Isolation reports a Job Object of the daemon's user with its limits.
func (s *Sandbox) Isolation() kernel.Isolation {
	return kernel.Isolation{Mode: s.iso.cfg.isolationMode(), UID: -1, Namespaces: []string{}, Network: true,
		MemoryMax: s.limits.MemoryMax, PidsMax: s.limits.PidsMax}
}

// ID is the kernel id the sandbox was made for.
func (s *Sandbox) ID() string { return s.id }

// Namespaces is nil: Windows has no namespaces; the Job Object confines.
func (s *Sandbox) Namespaces() []string { return nil }

// Seccomp is false: there is no seccomp filter on Windows.
func (s *Sandbox) Seccomp() bool { return false }
