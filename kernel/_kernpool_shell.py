"""kernpool runner, part 4: notebook syntax in cells, `!cmd` shell lines
and `%` / `%%` magics.

Loaded by the runner only when a cell does not compile as Python and has
a line that starts with "!" or "%": valid Python is never rewritten, and
cells without that syntax never load this file. The rewriting is
IPython's own (IPython.core.inputtransformer2, loaded by path: importing
the IPython package costs seconds); it turns the syntax into calls on
get_ipython(), which here returns a small shell of kernpool's own. Every
command runs inside the kernel's sandbox (this is the kernel's process;
its children inherit its uid, cgroup and namespaces), and its output is
captured like a cell's: it goes through the cell's sys.stdout and
sys.stderr, in order with the cell's prints.
"""
import os
import sys

# The magics kernpool implements; any other is a clear error.
LINE_MAGICS = ("cd", "env", "pip", "pwd", "time")
CELL_MAGICS = ("bash", "sh", "time", "writefile")

_TRANSFORMER = []


class MagicError(Exception):
    """A shell line or magic kernpool cannot run."""


# Tracebacks name it plainly, not by this file's module name.
MagicError.__module__ = "builtins"


def _transformer():
    """IPython's TransformerManager, or MagicError saying why there is none."""
    if _TRANSFORMER:
        return _TRANSFORMER[0]
    import importlib.util
    try:
        spec = importlib.util.find_spec("IPython")
    except (ImportError, ValueError):
        spec = None
    locations = spec and spec.submodule_search_locations
    path = os.path.join(locations[0], "core", "inputtransformer2.py") if locations else ""
    if not path or not os.path.isfile(path):
        raise MagicError(
            "`!` shell lines and `%%` magics need IPython, which this kernel's interpreter (%s) cannot "
            "import (Debian: apt-get install python3-ipython); without it, use subprocess.run(...) for "
            "shell commands and plain Python for magics." % sys.executable)
    module_spec = importlib.util.spec_from_file_location("_kernpool_ipython_transformer", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    _TRANSFORMER.append(module.TransformerManager())
    return _TRANSFORMER[0]


def has_syntax(source):
    """True when a line of source starts with "!" or "%" (after
    indentation), or assigns one (x = !cmd, x = %magic)."""
    import re
    return re.search(r"^[ \t]*(?:[\w.,\[\] \t]+=[ \t]*)?[!%]", source, re.M) is not None


def transform(source, namespace):
    """source with its shell lines and magics rewritten as Python, and
    get_ipython installed in the cell's builtins."""
    code = _transformer().transform_cell(source)
    import builtins
    if getattr(builtins, "get_ipython", None) is not _get_ipython:
        builtins.get_ipython = _get_ipython
    _SHELL.namespace = namespace
    return code


def _get_ipython():
    return _SHELL


def _expand(text, depth=2):
    """IPython's {name} and $name expansion, from the caller's frames."""
    if "{" not in text and "$" not in text:
        return text
    frame = sys._getframe(depth)
    names = dict(frame.f_globals)
    names.update(frame.f_locals)
    try:
        import string
        text = string.Formatter().vformat(text, (), names) if "{" in text else text
    except Exception:
        pass
    if "$" in text:
        import re
        text = re.sub(r"(?<!\$)\$([A-Za-z_]\w*)", lambda m: str(names.get(m.group(1), m.group(0))), text)
    return text


class _Shell:
    """What get_ipython() returns: the calls IPython's rewriting makes."""

    namespace = None

    def system(self, cmd):
        """!cmd: run cmd with the shell, its output captured like the cell's."""
        code = _run(["/bin/sh", "-c", _expand(cmd)])
        self.namespace["_exit_code"] = code

    def getoutput(self, cmd, split=True, depth=0):
        """x = !cmd: the command's stdout lines (its stderr goes to the cell's)."""
        import subprocess
        proc = subprocess.run(["/bin/sh", "-c", _expand(cmd)], stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        sys.stderr.write(proc.stderr.decode("utf-8", "replace"))
        text = proc.stdout.decode("utf-8", "replace")
        return text.splitlines() if split else text

    def run_line_magic(self, name, line, _stack_depth=1):
        line = _expand(line)
        method = getattr(self, "_line_" + name, None) if name in LINE_MAGICS else None
        if method is None:
            raise MagicError("%%%s is not a magic kernpool runs; it runs the line magics %s and the cell magics %s"
                             % (name, ", ".join("%" + m for m in LINE_MAGICS), ", ".join("%%" + m for m in CELL_MAGICS)))
        return method(line)

    def run_cell_magic(self, name, line, body):
        method = getattr(self, "_cell_" + name, None) if name in CELL_MAGICS else None
        if method is None:
            raise MagicError("%%%%%s is not a cell magic kernpool runs; it runs %s"
                             % (name, ", ".join("%%" + m for m in CELL_MAGICS)))
        return method(_expand(line), body)

    def _line_pip(self, line):
        import shlex
        # Fail fast without a network (a sandbox may have none): one retry,
        # a short timeout, unless the environment says otherwise.
        env = dict(os.environ)
        env.setdefault("PIP_RETRIES", "1")
        env.setdefault("PIP_TIMEOUT", "15")
        env.setdefault("PIP_DISABLE_PIP_VERSION_CHECK", "1")
        code = _run([sys.executable, "-m", "pip"] + shlex.split(line), env=env)
        if code == 0 and line.split()[:1] == ["install"]:
            print("Note: you may need to restart the kernel to use updated packages.")
        self.namespace["_exit_code"] = code

    def _line_cd(self, line):
        target = os.path.expanduser(line.strip().strip("'\"") or "~")
        os.chdir(target)
        print(os.getcwd())

    def _line_pwd(self, line):
        return os.getcwd()

    def _line_env(self, line):
        line = line.strip()
        if not line:
            return dict(os.environ)
        if "=" in line or " " in line:
            sep = "=" if "=" in line else " "
            name, value = line.split(sep, 1)
            os.environ[name.strip()] = value.strip()
            print("env: %s=%s" % (name.strip(), value.strip()))
            return None
        if line not in os.environ:
            raise MagicError("%env: no environment variable " + line)
        return os.environ[line]

    def _line_time(self, line):
        return _timed(line, self.namespace)

    def _cell_time(self, line, body):
        return _timed(body, self.namespace)

    def _cell_bash(self, line, body):
        self.namespace["_exit_code"] = _run(["/bin/bash", "-c", body])

    def _cell_sh(self, line, body):
        self.namespace["_exit_code"] = _run(["/bin/sh", "-c", body])

    def _cell_writefile(self, line, body):
        args = line.split()
        append = "-a" in args or "--append" in args
        names = [a for a in args if not a.startswith("-")]
        if len(names) != 1:
            raise MagicError("%%writefile needs one file name")
        path = os.path.expanduser(names[0].strip("'\""))
        existed = os.path.exists(path)
        with open(path, "a" if append else "w", encoding="utf-8") as f:
            f.write(body)
        print("%s %s" % ("Appending to" if append else ("Overwriting" if existed else "Writing"), names[0]))


_SHELL = _Shell()


def _timed(source, namespace):
    """%time: run source in the cell's namespace and print its times."""
    import time
    filename = "<timed>"
    try:
        code, mode = compile(source, filename, "eval"), "eval"
    except SyntaxError:
        code, mode = compile(source, filename, "exec"), "exec"
    wall, cpu = time.perf_counter(), os.times()
    try:
        result = eval(code, namespace) if mode == "eval" else exec(code, namespace)
    finally:
        after, wall = os.times(), time.perf_counter() - wall
        user, system = after.user - cpu.user, after.system - cpu.system
        print("CPU times: user %s, sys: %s, total: %s\nWall time: %s"
              % (_seconds(user), _seconds(system), _seconds(user + system), _seconds(wall)))
    return result


def _seconds(t):
    if t >= 1:
        return "%.2f s" % t
    if t >= 1e-3:
        return "%.0f ms" % (t * 1e3)
    return "%.0f µs" % (t * 1e6)


def _run(argv, env=None):
    """Run argv without stdin; copy its stdout and stderr to the cell's
    streams as they arrive. An interrupt kills it (the host kills the
    rest of the cell's processes too). Returns its exit code."""
    import subprocess
    import threading
    out, err = sys.stdout, sys.stderr
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)

    def pump(pipe, stream):
        import codecs
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        for chunk in iter(lambda: pipe.read1(65536), b""):
            stream.write(decoder.decode(chunk))
        stream.write(decoder.decode(b"", True))
        pipe.close()

    pumps = [threading.Thread(target=pump, args=(proc.stdout, out), daemon=True),
             threading.Thread(target=pump, args=(proc.stderr, err), daemon=True)]
    for t in pumps:
        t.start()
    try:
        code = proc.wait()
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    finally:
        for t in pumps:
            t.join()
    return code
