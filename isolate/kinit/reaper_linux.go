package kinit

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ReaperName is the reaper's argv[0] and the name ps shows for a kernel's
// init once it became one.
const ReaperName = "kernpool-reaper"

// reaperSignals are those the reaper reads from its signalfd: the
// forwarded ones and SIGCHLD. They stay blocked across the exec, so the
// reaper needs no handler, and a signal sent meanwhile waits for it.
func reaperSignals() []syscall.Signal {
	sigs := []syscall.Signal{syscall.SIGCHLD}
	for _, s := range forwarded() {
		sigs = append(sigs, s.(syscall.Signal))
	}
	return sigs
}

// newReaperFile writes the reaper's executable into a sealed memfd and
// returns it (close-on-exec: only the init's exec uses it). The init
// calls it before its seccomp filter. An error (no reaper for this
// architecture, memfd_create refused, e.g. vm.memfd_noexec = 2) leaves the
// Go supervisor in place.
func newReaperFile() (int, error) {
	image := reaperImage()
	if image == nil {
		return -1, errors.New("reaper: none for this architecture")
	}
	flags := unix.MFD_CLOEXEC | unix.MFD_ALLOW_SEALING
	fd, err := unix.MemfdCreate(ReaperName, flags|unix.MFD_EXEC)
	if errors.Is(err, unix.EINVAL) {
		fd, err = unix.MemfdCreate(ReaperName, flags) // before Linux 6.3: no MFD_EXEC
	}
	if err != nil {
		return -1, fmt.Errorf("reaper: memfd_create: %w", err)
	}
	if n, err := unix.Write(fd, image); err != nil || n != len(image) {
		_ = unix.Close(fd)
		return -1, fmt.Errorf("reaper: write: %d bytes, %v", n, err)
	}
	seals := unix.F_SEAL_SEAL | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
		_ = unix.Close(fd)
		return -1, fmt.Errorf("reaper: seal: %w", err)
	}
	return fd, nil
}

// ReaperProbe says whether a kernel's init can become the reaper on this
// host: the reaper's size in bytes, or why every init keeps its Go
// supervisor (no reaper for this architecture, executable memfds refused).
// The daemon asks once, for doctor; each init still decides for itself.
func ReaperProbe() (int, error) {
	fd, err := newReaperFile()
	if err != nil {
		return 0, err
	}
	_ = unix.Close(fd)
	return len(reaperImage()), nil
}

// execReaper replaces the init with the reaper (file, from newReaperFile)
// supervising the interpreter pid; the reaper writes ready's line. It
// returns only when the exec did not happen (off, no file, an error):
// then nothing changed but the calling thread's signal mask, and the
// caller must start the Go supervisor and then call unblock.
//
// It must run on the thread that forked the interpreter (Main locks it):
// the interpreter's Pdeathsig fires when that thread ends, and exec ends
// every other thread. That must be the main thread: the kernel keeps a
// parent-death signal per thread, the daemon's is on the main thread
// only, and an exec from another thread would drop it (the exec'ing
// thread takes the process over with its own, none).
func execReaper(file, pid int, ready Ready, off bool) (unblock func(), err error) {
	if file < 0 {
		return func() {}, errors.New("reaper: no executable")
	}
	if unix.Gettid() != unix.Getpid() {
		_ = unix.Close(file)
		return func() {}, errors.New("reaper: not on the main thread, whose parent-death signal the exec would drop")
	}
	defer func() { _ = unix.Close(file) }()
	set := sigset(reaperSignals())
	var old unix.Sigset_t
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, set, &old); err != nil {
		return func() {}, fmt.Errorf("reaper: block signals: %w", err)
	}
	unblock = func() { _ = unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil) }
	sfd, err := unix.Signalfd(-1, set, 0) // inherited by the reaper
	if err != nil {
		return unblock, fmt.Errorf("reaper: signalfd: %w", err)
	}
	defer func() { _ = unix.Close(sfd) }()
	if _, err := unix.FcntlInt(StatusFD, unix.F_SETFD, 0); err != nil {
		return unblock, fmt.Errorf("reaper: status fd: %w", err)
	}
	defer func() { _, _ = unix.FcntlInt(StatusFD, unix.F_SETFD, unix.FD_CLOEXEC) }() // after a failed exec
	if off {
		return unblock, errors.New("reaper: off (Config.NoReaper)")
	}
	ready.Supervisor = SupervisorReaper
	argv := []string{ReaperName, strconv.Itoa(pid), strconv.Itoa(sfd), ready.line()}
	// syscall.Exec holds off the runtime's thread creation during the exec.
	err = syscall.Exec("/proc/self/fd/"+strconv.Itoa(file), argv, []string{})
	return unblock, fmt.Errorf("reaper: exec: %w", err)
}

// sigset is the kernel sigset_t holding sigs.
func sigset(sigs []syscall.Signal) *unix.Sigset_t {
	var set unix.Sigset_t
	bits := uint(unsafe.Sizeof(set.Val[0]) * 8)
	for _, s := range sigs {
		n := uint(s) - 1
		set.Val[n/bits] |= 1 << (n % bits)
	}
	return &set
}

// ELF64 constants for elf64 (debug/elf's, without its package
// initialisation in the init binary).
const (
	elfHeaderSize   = 64
	elfPhdrSize     = 56
	elfTypeDyn      = 3 // ET_DYN: position-independent, loaded at a random base
	elfPtLoad       = 1
	elfPtGnuStack   = 0x6474e551
	elfFlagsRX      = 0x5
	elfFlagsRW      = 0x6
	elfPageAlign    = 0x1000
	elfPhdrCount    = 2
	elfCodeOffset   = elfHeaderSize + elfPhdrCount*elfPhdrSize
	elfIdentClass   = 2 // ELFCLASS64
	elfIdentData    = 1 // ELFDATA2LSB
	elfIdentVer     = 1 // EV_CURRENT
	elfMachineAMD64 = 62
)

// elf64 is the smallest little-endian executable ELF around code (position
// independent, entry at its first byte): one read+execute PT_LOAD holding
// the headers and the code, and a PT_GNU_STACK that keeps the stack
// non-executable. No sections, no interpreter, no data.
func elf64(machine uint16, code []byte) []byte {
	le := binary.LittleEndian
	size := uint64(elfCodeOffset + len(code))
	b := make([]byte, elfCodeOffset, size)
	copy(b, "\x7fELF")
	b[4], b[5], b[6] = elfIdentClass, elfIdentData, elfIdentVer
	le.PutUint16(b[16:], elfTypeDyn)
	le.PutUint16(b[18:], machine)
	le.PutUint32(b[20:], elfIdentVer)
	le.PutUint64(b[24:], elfCodeOffset) // e_entry: vaddr 0 maps offset 0
	le.PutUint64(b[32:], elfHeaderSize) // e_phoff
	le.PutUint16(b[52:], elfHeaderSize)
	le.PutUint16(b[54:], elfPhdrSize)
	le.PutUint16(b[56:], elfPhdrCount)
	load := b[elfHeaderSize:]
	le.PutUint32(load[0:], elfPtLoad)
	le.PutUint32(load[4:], elfFlagsRX)
	le.PutUint64(load[32:], size) // p_filesz; offset, vaddr, paddr 0
	le.PutUint64(load[40:], size) // p_memsz
	le.PutUint64(load[48:], elfPageAlign)
	stack := b[elfHeaderSize+elfPhdrSize:]
	le.PutUint32(stack[0:], elfPtGnuStack)
	le.PutUint32(stack[4:], elfFlagsRW)
	le.PutUint64(stack[48:], 16)
	return append(b, code...)
}
