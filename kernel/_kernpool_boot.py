"""kernpool runner, part 1: confinement before any user code, dying with
the host, the request pipe, helper threads, streamed cells' live writers,
and binding a spare to its owner.

Staged beside runner.py, which loads it by path first thing (kernel/doc.go,
"Dying with the host" and "File descriptors"; docs/design.md).
"""
import _thread
import io
import os
import sys


def die(code, message):
    """Refuse to run any user code: say why on stderr and exit."""
    try:
        os.write(2, ("kernpool runner: " + message + "\n").encode("utf-8", "replace"))
    finally:
        os._exit(code)


def _join_cgroups(paths):
    # Before anything else: on cgroup v1 the kernel places itself (race-free,
    # since no user code ran yet).
    for path in paths:
        try:
            fd = os.open(path, os.O_WRONLY)
            try:
                os.write(fd, b"0")
            finally:
                os.close(fd)
        except OSError as exc:
            die(121, "cannot join cgroup via %s: %s" % (path, exc))


def _apply_rlimits(spec):
    import resource
    for item in spec.split(","):
        item = item.strip()
        if not item:
            continue
        try:
            name, _, value = item.partition("=")
            soft, _, hard = value.partition(":")
            res = getattr(resource, "RLIMIT_" + name.strip().upper())
            lim = tuple(resource.RLIM_INFINITY if v in ("inf", "unlimited") else int(v)
                        for v in (soft, hard or soft))
            resource.setrlimit(res, lim)
        except (AttributeError, ValueError, OSError) as exc:
            die(122, "cannot apply rlimit %r: %s" % (item, exc))


def _no_new_privs():
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(38, 1, 0, 0, 0) != 0:
        die(123, "cannot set no_new_privs: errno %d" % ctypes.get_errno())


# The kernel's cgroup.procs files (v1 and hybrid), for _kill_kernel.
_CGROUP_PROCS = ()


def confine(env):
    """Join the cgroups, keep only fds 0-2 for cells, apply rlimits and
    no_new_privs, and read the bootstrap line. Returns the protocol fds
    (requests, frames, marks), the sentinel, the RPC token and what came
    after the bootstrap line."""
    global _CGROUP_PROCS
    _CGROUP_PROCS = tuple(p for p in env.get("KERNPOOL_CGROUP_PROCS", "").split(os.pathsep) if p)
    _join_cgroups(_CGROUP_PROCS)
    # Only fds 0-2 may reach cells: the host's parent may have leaked
    # inheritable fds into the daemon, and Go passes those on.
    try:
        os.closerange(3, max(os.sysconf("SC_OPEN_MAX"), 4096))
    except (OSError, ValueError):
        os.closerange(3, 4096)
    # Requests arrive on a private non-inheritable fd; fd 0 becomes /dev/null
    # so neither input() nor a subprocess can read (steal) protocol lines.
    protocol_in = os.dup(0)
    # Frames and stderr markers go out on private dups of fd 1 and 2, so a
    # cell that closes or redirects its fd 1/2 cannot derail the protocol.
    protocol_fds = (protocol_in, os.dup(1), os.dup(2))
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    rlimits = env.get("KERNPOOL_RLIMITS", "")
    if rlimits:
        _apply_rlimits(rlimits)
    if env.get("KERNPOOL_NO_NEW_PRIVS", "") == "1":
        _no_new_privs()
    # The secrets come on the request pipe, never in the environment (which
    # /proc/self/environ would keep showing after os.environ forgets it).
    sentinel, token, pending = _read_bootstrap(protocol_in)
    return protocol_fds, sentinel, token, pending


def _read_bootstrap(fd):
    """Read "KERNPOOL1 <sentinel> <token or ->" and what came after it."""
    buf = b""
    while b"\n" not in buf:
        chunk = os.read(fd, 4096)
        if not chunk:
            die(124, "the host sent no bootstrap line")
        buf += chunk
    line, _, pending = buf.partition(b"\n")
    parts = line.decode("ascii", "replace").split(" ")
    if len(parts) != 3 or parts[0] != "KERNPOOL1" or not parts[1]:
        die(124, "malformed bootstrap line")
    return parts[1], ("" if parts[2] == "-" else parts[2]), pending


def host_gone(kill_path):
    """The request pipe ended: the host died. Take the whole kernel down."""
    _kill_kernel(kill_path)
    try:
        if os.getpgrp() == os.getpid():
            os.killpg(os.getpgrp(), 9)
    finally:
        os._exit(125)


def _kill_kernel(kill_path):
    """Kill the kernel's cgroup: cgroup.kill when the sandbox gave one; on
    legacy cgroup v1 (no cgroup.kill) SIGKILL every other member its
    cgroup.procs files list until none is left, so setsid'd descendants die
    with a dead host too (killed members cannot fork; the pids cap bounds
    the rest; bounded passes)."""
    if kill_path:
        try:
            fd = os.open(kill_path, os.O_WRONLY)
            os.write(fd, b"1")
            os.close(fd)
        except OSError:
            pass
        return
    me = os.getpid()
    for _ in range(64):
        pids = set()
        for path in _CGROUP_PROCS:
            try:
                with open(path) as f:
                    pids.update(int(p) for p in f.read().split())
            except (OSError, ValueError):
                pass
        pids.discard(me)
        pids.discard(0)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, 9)
            except OSError:
                pass


def start_watchdog(kill_path):
    """Fork a watchdog that kills the runner's group once the runner is gone.

    The runner can die without running Python code: Pdeathsig SIGKILLs it
    when the host dies while a cell holds the GIL in C, and that would orphan
    the cell's children. The watchdog waits on a pidfd of the runner (no GIL,
    no polling) and then takes the group (and cgroup) down, itself included.
    Without pidfd support the request-pipe watcher and Pdeathsig remain.
    """
    if os.getpgrp() != os.getpid():
        return None
    try:
        pidfd = os.pidfd_open(os.getpid())
    except (AttributeError, OSError):
        return None
    pid = os.fork()
    if pid:
        os.close(pidfd)
        return pid
    try:
        import _signal
        _signal.signal(_signal.SIGINT, _signal.SIG_IGN)
        os.closerange(0, pidfd)
        os.closerange(pidfd + 1, 4096)
        import select
        select.select([pidfd], [], [])
        _kill_kernel(kill_path)
        os.killpg(os.getpgrp(), 9)
    finally:
        os._exit(0)


def requests(fd, pending, kill_path):
    """The request lines on the protocol fd (pending: what came with the
    bootstrap line). Its end means the host died: the kernel goes down.

    The main thread reads them between cells: a reader thread handing lines
    over costs a GIL and thread switch per request. While a cell runs, a
    thread waits for the pipe's hang-up in poll(2), off the GIL (data does
    not wake it), so a host that dies mid-cell still takes the kernel down.
    Without poll (Windows) a thread reads and hands lines over instead.
    """
    lines = _lines(fd, pending, kill_path)
    import select
    if not hasattr(select, "poll"):
        from _queue import SimpleQueue
        queue = SimpleQueue()

        def pump():
            for line in lines:
                queue.put(line)
        start_thread(pump, ())
        return iter(queue.get, None)
    start_thread(_watch_hangup, (select, fd, kill_path))
    return lines


def _lines(fd, pending, kill_path):
    """Request lines (bytes), and a writable buffer (never bytes) for each
    checkpoint blob the host sends before a load ("C <size>" and the raw
    bytes)."""
    buf = bytearray(pending)
    start = 0
    while True:
        nl = buf.find(b"\n", start)
        if nl >= 0:
            line = bytes(buf[start:nl])
            start = nl + 1
            if line[:2] == b"C ":
                blob, start = _blob(fd, buf, start, int(line[2:]), kill_path)
                yield blob
                continue
            yield line
            continue
        del buf[:start]
        start = 0
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            chunk = b""
        if not chunk:
            host_gone(kill_path)
        buf += chunk


def _blob(fd, buf, start, size, kill_path):
    """size raw bytes: those buffered from start on, then read straight
    into place. Returns them and where buf's unread bytes start."""
    blob = _buffer(size)
    have = min(size, len(buf) - start)
    view = memoryview(blob)
    view[:have] = buf[start:start + have]
    view = view[have:]
    readv = getattr(os, "readv", None)  # not on Windows
    while view:
        try:
            if readv is not None:
                n = readv(fd, [view])
            else:
                chunk = os.read(fd, min(len(view), 1 << 20))
                n = len(chunk)
                view[:n] = chunk
        except OSError:
            n = 0
        if not n:
            host_gone(kill_path)
        view = view[n:]
    return blob, start + have


def _buffer(size):
    """size writable bytes. Anonymous memory mapped with its pages in
    place where the platform can: faulting 10 MiB in page by page costs
    tens of milliseconds in a VM, MAP_POPULATE a few."""
    import mmap
    populate = getattr(mmap, "MAP_POPULATE", 0) if size >= 1 << 20 else 0
    if populate:
        try:
            return mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | populate)
        except (OSError, ValueError):
            pass
    return bytearray(size)


def start_thread(fn, args):
    """Start a helper thread that never takes SIGINT. A SIGINT a helper
    thread takes leaves the main thread asleep in its cell, uninterrupted
    (a thread still starting up, waiting for the GIL, took some). SIGINT is
    blocked around the start, so the thread inherits the block from birth."""
    import _signal
    mask = getattr(_signal, "pthread_sigmask", None)
    if mask is None:  # Windows: no SIGINT for the runner anyway
        return _thread.start_new_thread(fn, args)
    old = mask(_signal.SIG_BLOCK, (_signal.SIGINT,))
    try:
        return _thread.start_new_thread(fn, args)
    finally:
        mask(_signal.SIG_SETMASK, old)


def _watch_hangup(select, fd, kill_path):
    poller = select.poll()
    poller.register(fd, select.POLLHUP)
    while True:
        for _, events in poller.poll():
            if events & (select.POLLHUP | select.POLLERR | select.POLLNVAL):
                host_gone(kill_path)
        # Woken without a hang-up (a platform that reports data too):
        # do not spin while a cell runs.
        import time
        time.sleep(0.05)


class LiveRaw(io.RawIOBase):
    """fd 1 or 2 for a streamed cell. A write ending in a newline gets a K
    mark after it: the host holds a trailing newline back (it may begin a
    marker) until more bytes come, and the mark is that "more"."""

    def __init__(self, fd, sentinel):
        self.fd = fd
        self.tail = b"\n" + sentinel + b" K 0\n"

    def writable(self):
        return True

    def write(self, b):
        data = bytes(b)
        write_all(self.fd, data + self.tail if data.endswith(b"\n") else data)
        return len(data)


class LiveFlusher:
    """Flushes a streamed cell's writers every `seconds`, so a
    partial line (print(..., end='')) reaches the client without waiting for
    its newline or the cell's end. Between streamed cells its thread blocks
    on a lock: no wake-ups."""

    def __init__(self, streams, seconds):
        self.streams = streams
        self.seconds = seconds
        self.idle = _thread.allocate_lock()
        self.idle.acquire()  # held while no streamed cell runs
        start_thread(self.loop, ())

    def loop(self):
        import time
        while True:
            with self.idle:
                pass
            time.sleep(self.seconds)
            flush_quietly(self.streams)

    def start(self):
        self.idle.release()

    def stop(self):
        self.idle.acquire()


def flush_quietly(streams):
    for stream in streams:
        try:
            stream.flush()
        except (OSError, ValueError):
            pass


def write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def bind(payload, runner_only):
    """A spare meets its owner before the first cell (kernel/bind.go):
    staging files, environment, tool endpoint and token, cwd. Raises on
    anything it cannot do."""
    import json
    req = json.loads(payload)
    staging = os.path.dirname(os.path.abspath(__file__))
    for name, text in req.get("files", {}).items():
        if not name or name in (".", "..") or "/" in name or os.sep in name:
            raise ValueError("bad staging file name %r" % name)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL  # Windows lacks the two below
        flags |= getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
        fd = os.open(os.path.join(staging, name), flags, 0o600)
        try:
            write_all(fd, text.encode("utf-8"))
        finally:
            os.close(fd)
    for finder in list(sys.path_importer_cache.values()):
        if hasattr(finder, "invalidate_caches"):
            finder.invalidate_caches()  # the staging dir's listing changed
    env = os.environ
    for name in req.get("unset", []):
        env.pop(name, None)
    for name, value in req.get("set", {}).items():
        if name not in runner_only:
            env[name] = value
    env["MPLBACKEND"] = "Agg"
    runtime = sys.modules["_kernpool_runtime"]
    runtime.rpc_endpoint, runtime.rpc_token = req.get("rpc_endpoint", ""), req.get("rpc_token", "")
    cwd = req.get("cwd", "")
    if cwd:
        prev = os.getcwd()
        os.chdir(cwd)
        st = os.stat(".")  # what the chdir reached, not the path again
        want = (req.get("dev", 0), req.get("ino", 0))
        if want != (0, 0) and (st.st_dev, st.st_ino) != tuple(want):
            os.chdir(prev)
            raise OSError("cwd %s is another directory inside the kernel's sandbox" % cwd)
