"""kernpool kernel runner: one persistent namespace, one cell per request.

Protocol (see kernel/doc.go): requests are JSON objects {"id", "code"}, one
per stdin line; each gets exactly one reply frame on stdout,
b"\\n" + SENTINEL + b" " + len(body) + b"\\n" + body, preceded on stderr by the
marker b"\\n" + SENTINEL + b" E " + execution_count + b"\\n".

Start-up cost matters (a kernel is spawned per key), so this file imports
only modules the interpreter already loaded at start (os, sys, io,
_json) and loads json, traceback and asyncio only when a cell needs
them.
"""
import _json
import _signal
import _thread
import io
import os
import sys

_PYCF_ONLY_AST = 0x400
_PYCF_ALLOW_TOP_LEVEL_AWAIT = 0x2000
_CO_COROUTINE = 0x80
_RUNNER_ONLY = (
    "KERNPOOL_SENTINEL", "KERNPOOL_CGROUP_PROCS", "KERNPOOL_CGROUP_KILL",
    "KERNPOOL_RLIMITS", "KERNPOOL_NO_NEW_PRIVS", "KERNPOOL_RPC_ENDPOINT",
    "KERNPOOL_RPC_TOKEN", "KERNPOOL_OUTPUT_CAPS", "KERNPOOL_CHECKPOINT_WARM",
)
# Set by _start from KERNPOOL_OUTPUT_CAPS (kernel/caps.go defines them), in
# UTF-8 bytes: Python-level stdout and stderr kept from a cell's start, the
# end of each kept beyond that, the traceback.
_STDOUT_LIMIT = 0
_STDERR_LIMIT = 0
_TAIL_LIMIT = 0
_TRACEBACK_LIMIT = 0
# Displays: the cap of one display's JSON and of all of one cell's.
_DISPLAY_LIMIT = 0
_DISPLAY_CELL_LIMIT = 0
# True only while user code runs: SIGINT raises KeyboardInterrupt then and
# is ignored otherwise, so an interrupt between cells, or while the runner
# writes a frame, cannot kill the runner or cut the protocol.
_IN_CELL = [False]
# A SIGINT that came after the cell's begin marks but before its code ran:
# raised as soon as the code starts. The begin marks clear it, so a stray
# SIGINT between cells never reaches the next cell (the host signals a
# cell only after it read the cell's begin mark).
_PENDING = [False]
# How soon a streamed cell's partial line goes out (_kernpool_boot.LiveFlusher).
_LIVE_FLUSH_SECONDS = 0.05
# Set by _start from KERNPOOL_CHECKPOINT_WARM (a persist kernel, whose
# state the pool will save): the checkpoint module is imported after the
# first cell's reply, while the kernel waits for its next request, so no
# save (a drain saves many at once) pays for it.
_WARM_CHECKPOINT = [False]


def _on_sigint(signum, frame):
    if _IN_CELL[0]:
        raise KeyboardInterrupt
    _PENDING[0] = True


def _take_back_sigint(cells):
    """Ends user code's hold on SIGINT: a handler the cell installed is
    kept for the next cell and the runner's goes back, so a late repeat of
    the host's interrupt (it repeats SIGINT until it sees the cell end)
    cannot raise KeyboardInterrupt in the runner's own code and kill the
    kernel. SIGINT waits while the handlers swap."""
    mask = getattr(_signal, "pthread_sigmask", None)  # not on Windows
    while True:
        try:
            if mask:
                mask(_signal.SIG_BLOCK, (_signal.SIGINT,))
            try:
                handler = _signal.getsignal(_signal.SIGINT)
                if handler is not _on_sigint:
                    cells.sigint = handler
                    _signal.signal(_signal.SIGINT, _on_sigint)
                _IN_CELL[0] = False
            finally:
                if mask:
                    mask(_signal.SIG_UNBLOCK, (_signal.SIGINT,))
            return
        except KeyboardInterrupt:
            continue  # the cell's handler ran before the swap: swap again


# The runner's other staged files (kernel/runner.go stages them beside
# this one); loaded by path, since cells may change sys.path.
_HERE = os.path.dirname(os.path.abspath(__file__))
_STAGED = {}


def _staged(name):
    mod = _STAGED.get(name)
    if mod is None:
        path = os.path.join(_HERE, name + ".py")
        mod = type(sys)(name)
        mod.__file__ = path
        with open(path, "rb") as f:
            exec(compile(f.read(), path, "exec"), mod.__dict__)
        _STAGED[name] = mod
    return mod


def _start():
    """Confine this process and hide the runner's variables from cells."""
    env = os.environ
    boot = _staged("_kernpool_boot")
    protocol_fds, sentinel, token, pending = boot.confine(env)
    _read_caps(env.get("KERNPOOL_OUTPUT_CAPS", ""), boot.die)
    runtime = type(sys)("_kernpool_runtime")
    runtime.rpc_endpoint = env.get("KERNPOOL_RPC_ENDPOINT", "")
    runtime.rpc_token = token
    runtime.kernel_id = env.get("KERNPOOL_KERNEL_ID", "")
    sys.modules["_kernpool_runtime"] = runtime
    kill_path = env.get("KERNPOOL_CGROUP_KILL", "")
    # matplotlib draws off-screen, with its cache in the kernel's tmpdir.
    env["MPLBACKEND"] = "Agg"
    env.setdefault("MPLCONFIGDIR", os.path.join(env.get("TMPDIR", "/tmp"), "matplotlib"))
    sys.meta_path.insert(0, _PyplotHook())
    sys.displayhook = _displayhook
    import builtins
    builtins.display = display
    builtins.input = _no_input
    _WARM_CHECKPOINT[0] = env.get("KERNPOOL_CHECKPOINT_WARM", "") == "1"
    for name in _RUNNER_ONLY:
        env.pop(name, None)
    return sentinel.encode("utf-8"), kill_path, protocol_fds, pending


def _read_caps(value, die):
    global _STDOUT_LIMIT, _STDERR_LIMIT, _TAIL_LIMIT, _TRACEBACK_LIMIT, _DISPLAY_LIMIT, _DISPLAY_CELL_LIMIT
    try:
        stdout, stderr, tail, trace, display, cell = (int(v) for v in value.split(","))
    except ValueError:
        die(126, "malformed KERNPOOL_OUTPUT_CAPS %r" % value)
    if stdout <= 0 or stderr <= 0 or tail < 0 or trace < 256 or display <= 0 or cell < display:
        die(126, "KERNPOOL_OUTPUT_CAPS out of range: %r" % value)
    _STDOUT_LIMIT, _STDERR_LIMIT, _TAIL_LIMIT, _TRACEBACK_LIMIT = stdout, stderr, tail, trace
    _DISPLAY_LIMIT, _DISPLAY_CELL_LIMIT = display, cell


# The display machinery (_kernpool_display.py), loaded on first use: most
# cells show nothing. [its Displays, the runner's D-frame writer]
_DISPLAYS = [None, None]


def _displays():
    if _DISPLAYS[0] is None:
        mod = _staged("_kernpool_display")
        _DISPLAYS[0] = mod.Displays(_DISPLAY_LIMIT, _DISPLAY_CELL_LIMIT, _DISPLAYS[1])
    return _DISPLAYS[0]


def display(*objs, metadata=None):
    """Show each object as a rich display (IPython's display)."""
    _displays().display(objs, metadata)


def _displayhook(value):
    """The last expression's value: a rich display, else its repr."""
    if value is not None:
        _displays().hook(value)


class _PyplotHook:
    """A meta path finder that patches matplotlib.pyplot.show on import."""

    def find_spec(self, name, path=None, target=None):
        if name != "matplotlib.pyplot":
            return None
        return _displays().pyplot_spec(self, name, path, target)


_scanstring = _json.scanstring
_encode = _json.encode_basestring


def _parse_request(line):
    """Decode {"id": str, "code": str[, "stream": bool][, "op": str]
    [, "env": {str: str}]} into (id, code, stream, op, env); a fast path for
    the host's exact shapes."""
    try:
        if line.startswith('{"id":"'):
            rid, end = _scanstring(line, 7, True)
            if line.startswith(',"code":"', end):
                code, end = _scanstring(line, end + 9, True)
                rest = line[end:].strip()
                if rest == "}":
                    return rid, code, False, "", None
                if rest == ',"stream":true}':
                    return rid, code, True, "", None
    except ValueError:
        pass
    import json
    req = json.loads(line)
    if not isinstance(req, dict):
        raise ValueError("request is not a JSON object")
    rid, code, op = req.get("id", ""), req.get("code", ""), req.get("op", "")
    if not isinstance(rid, str) or not isinstance(code, str) or not isinstance(op, str):
        raise ValueError('request needs string fields "id" and "code" (or "op")')
    env = req.get("env")
    if env is not None and not (isinstance(env, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())):
        raise ValueError('request field "env" must map strings to strings')
    return rid, code, req.get("stream") is True, op, env


# The AST node classes, taken from a tiny parse: importing _ast costs more.
_INTERACTIVE = type(compile("0", "<kernpool>", "single", _PYCF_ONLY_AST))
_EXPR = type(compile("0", "<kernpool>", "single", _PYCF_ONLY_AST).body[0])


# _ends_in_statement's tables: first words of statements that are not
# expressions; characters that make a line need the parser's judgement
# (strings, brackets, ";", continuations, comments, unusual whitespace).
_STATEMENT_WORDS = frozenset((
    "import", "from", "del", "pass", "assert", "raise", "return", "global", "nonlocal", "break",
    "continue", "if", "elif", "else", "for", "while", "with", "def", "class", "try", "except",
    "finally", "async",
))
_PARSER_CHARS = frozenset("'\"()[]{};\\#\r\f\v\x00")


def _ends_in_statement(source):
    """True only when the cell's last top-level statement is certainly not
    an expression (so there is no value to display), judged from its last
    line; False means "ask the parser". Exact because the line is taken only
    when it has no strings, brackets, ";", comment or continuation: then it
    is one whole logical line. Indented, it ends a compound statement; at
    column 0 it is a statement when it starts with a statement keyword or
    holds ":" or an "=" outside a comparison (without lambda, an expression
    has neither). Invalid source fails in compile() with the parser's error
    either way."""
    text = source.rstrip(" \t\n")
    if not text:
        return True
    nl = text.rfind("\n")
    line = text[nl + 1:]
    if not line.isascii() or not _PARSER_CHARS.isdisjoint(line) or "lambda" in line:
        return False
    if nl >= 0 and text[:nl].rstrip().endswith("\\"):
        return False  # the line continues the one before
    if line[0] in " \t":
        return True
    if ":" in line or line.split(None, 1)[0] in _STATEMENT_WORDS:
        return True
    return "=" in line.replace("==", "").replace("!=", "").replace("<=", "").replace(">=", "")


def _compile(source, filename):
    """The cell's code object and, when it ends in an expression, that
    expression's (run in "single" mode, which displays its value)."""
    if _ends_in_statement(source):
        # Nothing to display: compiling the text directly skips
        # building the AST's Python objects (about half the cost).
        return compile(source, filename, "exec", _PYCF_ALLOW_TOP_LEVEL_AWAIT), None
    tree = compile(source, filename, "exec", _PYCF_ONLY_AST | _PYCF_ALLOW_TOP_LEVEL_AWAIT)
    last = None
    if tree.body and type(tree.body[-1]) is _EXPR:
        last = _INTERACTIVE(body=[tree.body.pop()])
    body = compile(tree, filename, "exec", _PYCF_ALLOW_TOP_LEVEL_AWAIT)
    return body, compile(last, filename, "single", _PYCF_ALLOW_TOP_LEVEL_AWAIT) if last else None


def _compile_cell(source, filename, namespace):
    """_compile, and for a cell that is not Python but has lines starting
    with "!" or "%", _kernpool_shell's rewriting of its notebook syntax."""
    try:
        return _compile(source, filename)
    except SyntaxError:
        if "!" not in source and "%" not in source:
            raise
        shell = _staged("_kernpool_shell")
        if not shell.has_syntax(source):
            raise
    return _compile(shell.transform(source, namespace), filename)


class StdinNotAvailableError(EOFError):
    """input() in a kernpool cell: there is no stdin to read."""


def _no_input(prompt=""):
    raise StdinNotAvailableError(
        "input() is not available in a kernpool cell: a cell has no stdin. "
        "Pass the data in the cell's code, in a file, or through a tool call.")


class _Cells:
    """The persistent namespace and the cell counter."""

    def __init__(self):
        main = type(sys)("__main__")
        main.__builtins__ = __builtins__
        # Cells run in __main__'s dict, so pickling and
        # sys.modules["__main__"] lookups find what cells defined.
        sys.modules["__main__"] = main
        self.globals = main.__dict__
        self.count = 0
        self.loop = None
        # Cell sources not yet handed to linecache (loaded lazily: it costs
        # a millisecond of start-up).
        self.sources = {}
        self.next = None
        # A SIGINT handler a cell installed: back in force in each cell.
        self.sigint = None

    def _run(self, code_obj):
        result = eval(code_obj, self.globals)
        if code_obj.co_flags & _CO_COROUTINE:
            if self.loop is None:
                import asyncio
                self.loop = asyncio.new_event_loop()
                asyncio.set_event_loop(self.loop)
            self.loop.run_until_complete(result)

    def run(self, source, begin):
        """Run one cell; returns (status, traceback, exit_code). begin()
        marks the cell's start on the output streams after the compile
        (which writes nothing at the fd level and takes no signal), so a
        quick cell's marks reach the host with its reply: one wake-up of
        each host reader instead of two."""
        self.count += 1
        filename = "<cell-%d>" % self.count
        self.next = None
        self.sources[filename] = source
        _publish_sources(self.sources)
        try:
            try:
                body, tail = _compile_cell(source, filename, self.globals)
            finally:
                begin()
            # The code that runs next, for an interrupt that lands in the
            # runner's frames between two of the cell's parts: its
            # traceback then points at the line that did not run yet.
            self.next = body
            try:
                if self.sigint is not None:
                    _signal.signal(_signal.SIGINT, self.sigint)
                    self.sigint = None
                _IN_CELL[0] = True
                if _PENDING[0]:
                    _PENDING[0] = False
                    raise KeyboardInterrupt
                self._run(body)
                if tail is not None:
                    self.next = tail  # no signal check between these lines
                    self._run(tail)
                if "matplotlib.pyplot" in sys.modules:
                    _displays().flush_figures()
            finally:
                _take_back_sigint(self)
        except SystemExit as exc:
            show, errors = _staged("_kernpool_display"), _staged("_kernpool_errors")
            return "exit", errors.cap_text("SystemExit: " + show.safe_repr(exc.code), _TRACEBACK_LIMIT), show.exit_code(exc.code)
        except BaseException as exc:
            return "error", _error_text(exc, self.sources, self.next), 1
        return "ok", "", 0


def _publish_sources(sources):
    """Hand cell sources to linecache once it is loaded, for tracebacks."""
    linecache = sys.modules.get("linecache")
    if linecache is None or not sources:
        return
    for filename, source in sources.items():
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    sources.clear()


def _error_text(exc, sources, pending=None):
    """exc as (traceback text, ename, evalue, traceback entries), capped,
    without kernpool's frames or the staging dir's path; formatting lives
    in _kernpool_errors.py, loaded on the first error."""
    import linecache  # loaded first: tracebacks read the cells' sources there
    _publish_sources(sources)
    return _staged("_kernpool_errors").describe(exc, _on_sigint.__code__, _HERE, _TRACEBACK_LIMIT, pending)


def _clip(text, data, limit):
    """(head, tail) of a stream's text (data: its UTF-8) as JSON string
    literals: all of it in head when it fits limit bytes, else its first
    limit bytes and its last _TAIL_LIMIT, each cut on a character boundary."""
    if len(data) <= limit:
        return _jstr(text), b""
    cut = limit
    while cut > 0 and data[cut] & 0xC0 == 0x80:
        cut -= 1
    start = max(len(data) - _TAIL_LIMIT, cut)
    while start < len(data) and data[start] & 0xC0 == 0x80:
        start += 1
    return _jbytes(data[:cut]), _jbytes(data[start:])


def _flush_std():
    for stream in (sys.__stdout__, sys.__stderr__):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass


class _Runner:
    def __init__(self, sentinel, frame_fd, mark_fd):
        self.sentinel = sentinel
        self.frame_fd = frame_fd
        self.mark_fd = mark_fd
        self.begin_mark = b"\n" + sentinel + b" B "
        self.end_mark = b"\n" + sentinel + b" E "
        self.cells = _Cells()
        self.live = None  # line-buffered writers on fd 1 and 2 (streamed cells)
        _DISPLAYS[1] = self.emit_display

    def helpers(self, pids):
        """Name the runner's own processes (H marks on stderr, before any
        cell): an interrupt ends every other process of the kernel."""
        for pid in pids:
            try:
                os.write(self.mark_fd, b"\n" + self.sentinel + b" H " + str(pid).encode() + b"\n")
            except OSError:
                pass

    def begin(self):
        """Mark where this cell's fd-level output starts on both streams.

        What threads of earlier cells left in Python's buffers is flushed
        first, so it lands before the marks: written while no cell ran,
        the host drops it."""
        _flush_std()
        _PENDING[0] = False
        mark = self.begin_mark + str(self.cells.count).encode() + b"\n"
        for fd in (self.frame_fd, self.mark_fd):
            try:
                os.write(fd, mark)
            except OSError:
                pass

    def data(self, pieces):
        """A checkpoint blob's pieces as one C frame on stdout (nothing
        when there are none)."""
        if not pieces:
            return
        write_all = _staged("_kernpool_boot").write_all
        small = [b"\n" + self.sentinel + b" C " + str(sum(len(p) for p in pieces)).encode() + b"\n"]
        size = 0
        for p in pieces:  # small pieces go out together, big ones as they are
            if len(p) < 65536:
                small.append(p)
                size += len(p)
                if size < 262144:
                    continue
            if small:
                write_all(self.frame_fd, b"".join(small))
                small, size = [], 0
            if len(p) >= 65536:
                write_all(self.frame_fd, p)
        if small:
            write_all(self.frame_fd, b"".join(small))

    def emit_display(self, body):
        """One display as a D frame on stdout, after the output before it."""
        _flush_std()
        if self.live is not None and sys.stdout in self.live:
            _flush(self.live)
        _staged("_kernpool_boot").write_all(self.frame_fd, b"\n" + self.sentinel + b" D " + str(len(body)).encode() + b"\n" + body)

    def cell(self, rid, source, stream, env=None):
        if env:
            # This cell's own variables: set now, restored after it.
            before = {name: os.environ.get(name) for name in env}
            os.environ.update(env)
            try:
                return self.cell(rid, source, stream)
            finally:
                for name, value in before.items():
                    if value is None:
                        os.environ.pop(name, None)
                    else:
                        os.environ[name] = value
        if _DISPLAYS[0] is not None:
            _DISPLAYS[0].reset()
        if stream:
            if self.live is None:
                boot = _staged("_kernpool_boot")
                self.live = tuple(io.TextIOWrapper(io.BufferedWriter(boot.LiveRaw(fd, self.sentinel)), encoding="utf-8",
                                                   errors="surrogateescape", line_buffering=True)
                                  for fd in (1, 2))
                self.flusher = boot.LiveFlusher(self.live, _LIVE_FLUSH_SECONDS)
            out, err = self.live
            self.flusher.start()
        else:
            out, err = io.StringIO(), io.StringIO()
        saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = out, err
        try:
            status, trace, code = self.cells.run(source, self.begin)
        except KeyboardInterrupt:  # arrived between the cell's end and its bookkeeping
            status, trace, code = "error", ("KeyboardInterrupt\n", "KeyboardInterrupt", "", ["KeyboardInterrupt\n"]), 1
        finally:
            _take_back_sigint(self.cells)
            sys.stdout, sys.stderr = saved
        if stream:
            self.flusher.stop()
            _flush((out, err))
            out = err = None
        _publish_sources(self.cells.sources)
        self.reply(rid, status, out.getvalue() if out else "", err.getvalue() if err else "", trace, code)
        return status, code

    def variables(self, rid):
        """A namespace listing, interruptible like a cell (a repr runs user
        code): what a repr prints is dropped, never part of the listing or
        of the next cell's output."""
        saved = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = _Discard()
        try:
            status, listing, trace = self._list()
        except KeyboardInterrupt:  # arrived between the listing's end and its bookkeeping
            status, listing, trace = "error", "", "KeyboardInterrupt\n"
        finally:
            _take_back_sigint(self.cells)
            sys.stdout, sys.stderr = saved
        self.reply(rid, status, listing, "", trace, 1 if trace else 0)

    def _list(self):
        try:
            try:
                # The begin marks let the host interrupt the listing (it
                # signals only after it read them).
                self.begin()
                _IN_CELL[0] = True
                if _PENDING[0]:
                    _PENDING[0] = False
                    raise KeyboardInterrupt
                listing = _staged("_kernpool_display").variables(self.cells.globals, 1000, 200)
            finally:
                _take_back_sigint(self.cells)
        except BaseException as exc:
            return "error", "", _error_text(exc, {})
        return "ok", listing, ""

    def reply(self, rid, status, stdout, stderr, trace, code):
        """Flush fd-level output, mark the end of stderr, then write the frame."""
        n = str(self.cells.count).encode()
        _flush_std()
        stderr_closed = False
        try:
            os.write(self.mark_fd, self.end_mark + n + b"\n")
        except OSError:
            stderr_closed = True
        # Members at their zero value are left out (the host decodes a
        # missing member as zero): a quiet cell's frame stays short, and
        # costs nothing for the members it does not have.
        parts = [b'{"id":', _jstr(rid), b',"status":"', status.encode(), b'","execution_count":', n]
        if stdout:
            data = stdout.encode("utf-8", "surrogatepass")
            head, tail = _clip(stdout, data, _STDOUT_LIMIT)
            parts += (b',"stdout":', head, b',"stdout_len":', str(len(data)).encode())
            if len(data) > _STDOUT_LIMIT:
                parts += (b',"stdout_clipped":true,"stdout_tail":', tail)
        if stderr:
            data = stderr.encode("utf-8", "surrogatepass")
            head, tail = _clip(stderr, data, _STDERR_LIMIT)
            parts += (b',"stderr":', head)
            if len(data) > _STDERR_LIMIT:
                parts += (b',"stderr_clipped":true,"stderr_len":', str(len(data)).encode(), b',"stderr_tail":', tail)
        if trace:
            if type(trace) is tuple:
                trace, ename, evalue, entries = trace
                parts += (b',"ename":', _jstr(ename), b',"evalue":', _jstr(evalue),
                          b',"frames":', _jstr("\x00".join(entries)))
            parts += (b',"traceback":', _jstr(trace))
        if code:
            parts += (b',"exit_code":', str(code).encode())
        if _DISPLAYS[0] is not None and _DISPLAYS[0].dropped:
            parts += (b',"displays_dropped":', str(_DISPLAYS[0].dropped).encode())
        if stderr_closed:
            parts.append(b',"stderr_closed":true')
        parts.append(b"}")
        body = b"".join(parts)
        head = b"\n" + self.sentinel + b" " + str(len(body)).encode() + b"\n"
        written = os.writev(self.frame_fd, (head, body))
        if written < len(head) + len(body):
            _staged("_kernpool_boot").write_all(self.frame_fd, (head + body)[written:])


class _Discard(io.TextIOBase):
    """A text stream that drops what it is given."""

    def writable(self):
        return True

    def write(self, text):
        return len(text)


def _flush(streams):
    _staged("_kernpool_boot").flush_quietly(streams)


# Control characters other than \t \n \r: rare in output, they send a
# string down the general (slower) escaping path.
_RARE_CONTROLS = bytes(c for c in range(32) if c not in (9, 10, 13))


def _jstr(text):
    """text as a JSON string literal in UTF-8 (lone surrogates passed through)."""
    if len(text) < 65536:
        return _encode(text).encode("utf-8", "surrogatepass")
    return _jbytes(text.encode("utf-8", "surrogatepass"))


def _jbytes(data):
    """data (UTF-8, lone surrogates allowed) as a JSON string literal.

    _json's escaper handles one character at a time; for large outputs,
    escaping the UTF-8 bytes with bytes.replace (memchr speed) is several
    times faster when only the common escapes are needed.
    """
    if len(data) < 65536 or len(data.translate(None, _RARE_CONTROLS)) != len(data):
        return _encode(data.decode("utf-8", "surrogatepass")).encode("utf-8", "surrogatepass")
    return b'"' + (data.replace(b"\\", b"\\\\").replace(b'"', b'\\"').replace(b"\n", b"\\n")
                   .replace(b"\t", b"\\t").replace(b"\r", b"\\r")) + b'"'


def _preload(runner, rid, names):
    """Import the profile's preload modules (operator-chosen) before the
    first cell; what they print is dropped (kernel/bind.go)."""
    saved = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = io.StringIO()
    trace = ""
    try:
        _IN_CELL[0] = True
        import importlib
        for name in names.split("\n"):
            if name:
                importlib.import_module(name)
    except BaseException as exc:
        trace = _error_text(exc, {})
    finally:
        _IN_CELL[0] = False
        sys.stdout, sys.stderr = saved
    runner.reply(rid, "error" if trace else "ok", "", "", trace, 1 if trace else 0)


def _bind(runner, rid, payload):
    """A spare meets its owner before the first cell (kernel/bind.go)."""
    try:
        _staged("_kernpool_boot").bind(payload, _RUNNER_ONLY)
        runner.reply(rid, "ok", "", "", "", 0)
    except BaseException as exc:
        runner.reply(rid, "error", "", "", _error_text(exc, {}), 1)


def _warm_checkpoint():
    """Import the checkpoint module ahead of the first save; a failure
    is left for that save to report."""
    try:
        import _kernpool_checkpoint  # noqa: F401
    except BaseException:
        pass


def _checkpoint(runner, rid, op, arg, blob):
    """A checkpoint request: _kernpool_checkpoint.py (kernel/checkpoint.py,
    staged beside this file) does the work, interruptible like a cell; a
    saved blob then goes out in a C frame before the reply."""
    mod = None
    try:
        _IN_CELL[0] = True
        # The begin marks let the host interrupt the request (it signals
        # only after it read them): an idle save a cell is waiting for.
        runner.begin()
        import _kernpool_checkpoint as mod
        out = mod.handle(op, arg, runner.cells, blob)
        blob = None
        # From here SIGINT waits: a C frame cut short would derail the
        # stream.
        _IN_CELL[0] = False
        runner.data(mod.outgoing())
        runner.reply(rid, "ok", out, "", "", 0)
    except BaseException as exc:
        _IN_CELL[0] = False
        if mod is not None:
            mod.outgoing()
        runner.reply(rid, "error", "", "", _error_text(exc, {}), 1)


def main():
    # Before anything else: the host interrupts only after the H marks
    # (written below), but an operator's Ctrl-C may come at any time.
    _signal.signal(_signal.SIGINT, _on_sigint)
    sentinel, kill_path, (protocol_in, frame_fd, mark_fd), pending = _start()
    watchdog = _staged("_kernpool_boot").start_watchdog(kill_path)
    requests = _staged("_kernpool_boot").requests(protocol_in, pending, kill_path)
    runner = _Runner(sentinel, frame_fd, mark_fd)
    runner.helpers([os.getpid()] + ([watchdog] if watchdog else []))
    blob = None
    for line in requests:
        if type(line) is not bytes:
            blob = line  # a checkpoint to load: the next request takes it
            continue
        line, taken, blob = line.strip(), blob, None
        if not line:
            continue
        try:
            rid, source, stream, op, env = _parse_request(line.decode("utf-8", "surrogateescape"))
        except ValueError as exc:
            runner.reply("", "error", "", "", "kernpool runner: malformed request: %s\n" % exc, 1)
            continue
        if op == "vars":
            runner.variables(rid)
            continue
        if op == "bind":
            _bind(runner, rid, source)
            continue
        if op == "preload":
            _preload(runner, rid, source)
            continue
        if op.startswith("checkpoint."):
            _checkpoint(runner, rid, op, source, taken)
            continue
        if op:
            runner.reply(rid, "error", "", "", "kernpool runner: unknown op %r\n" % op[:64], 1)
            continue
        status, code = runner.cell(rid, source, stream, env)
        if status == "exit":
            os._exit(code & 0xFF)
        if _WARM_CHECKPOINT[0]:
            _WARM_CHECKPOINT[0] = False
            _warm_checkpoint()


if __name__ == "__main__":
    main()
