"""kernpool checkpoints: save and restore a kernel's user namespace.

Staged beside runner.py as _kernpool_checkpoint.py and imported by the
runner only for "checkpoint.*" requests (docs/design.md, "Lossless
eviction"). Everything here runs inside the kernel: its sandbox, its uid,
its memory cap. The daemon never unpickles anything; it moves the blob
built here as opaque raw bytes over the existing pipes (kernel/checkpoint.go):
the runner sends a saved blob in a C frame before the save's reply, and
reads a blob to restore from the request pipe ("C <size>" and the bytes)
before the load request. The daemon enforces every bound again.

The blob (version 2) is MAGIC, the header's length (8 bytes, big endian),
the header, then each value's pieces back to back. The header is a pickle
of plain containers:
  {"v": 2, "modules": [(name, module)], "defs": [(order, name, source)],
   "values": [(name, kind, [piece lengths])]}
A value of kind "bytes" or "bytearray" is its one piece, raw; one of kind
"pickle" is its pickle, then the out-of-band buffers (pickle protocol 5)
the pickle refers to, raw: neither is copied on save (the runner writes
them from the objects' own memory), and a buffer-backed value such as a
numpy array is restored onto the received blob without a copy. Version 1
blobs (one pickle: {"v": 1, ..., "values": [(name, pickle bytes)]}) still
load. Each value is pickled on its own, so one object that does not
pickle (or does not unpickle) loses only its own name. Functions and classes defined
in cells are saved as the source of their top-level def/class statement
(pickle stores them by reference to __main__, which a new kernel lacks);
modules by name, so `import numpy as np` comes back as np.
"""
import sys
import types

# The C modules alone: "pickle" and "json" would import re, struct and
# more, most of the cost of a kernel's first save (a drain saves many).
try:
    import _pickle as pickle
except ImportError:
    import pickle
try:
    from _json import encode_basestring_ascii as _jstr
except ImportError:
    from json.encoder import encode_basestring_ascii as _jstr

VERSION = 2
# Protocol 5 keeps buffers out of band (PickleBuffer: Python 3.8 on).
PROTOCOL = 5 if hasattr(pickle, "PickleBuffer") else 4
MAGIC = b"KPCK2\n"
# The most names listed in a reply (the daemon enforces the same figure).
MAX_NAMES = 1000
MAX_NAME_CHARS = 256

_blob = [[]]      # the last saved blob's pieces, until the runner sent them


def handle(op, arg, cells, blob):
    """Run one checkpoint request; returns the reply's stdout text. blob
    is what came on the request pipe just before it (None: nothing)."""
    if op == "checkpoint.save":
        return save(cells.globals, _cell_sources(cells), int(arg))
    if op == "checkpoint.load":
        if blob is None or len(blob) != int(arg):
            raise ValueError("checkpoint load: %s bytes came, %s announced" % (None if blob is None else len(blob), arg[:32]))
        return load(cells.globals, blob)
    raise ValueError("unknown checkpoint op %r" % op[:64])


def outgoing():
    """The pieces of the blob the last save kept (the runner sends them
    as one C frame), once."""
    pieces, _blob[0] = _blob[0], []
    return pieces


def _listing(names):
    """A JSON list of at most MAX_NAMES names, each clipped."""
    return "[" + ",".join(_jstr(n[:MAX_NAME_CHARS]) for n in names[:MAX_NAMES]) + "]"


def _cell_sources(cells):
    """The cells' sources in run order: linecache holds the published ones,
    the runner those not yet handed over."""
    found = dict(cells.sources)
    linecache = sys.modules.get("linecache")
    if linecache is not None:
        for filename, entry in list(linecache.cache.items()):
            if isinstance(filename, str) and filename.startswith("<cell-") and len(entry) == 4:
                found.setdefault(filename, "".join(entry[2]))

    def number(filename):
        try:
            return int(filename[6:-1])
        except ValueError:
            return 0
    return sorted(((number(f), src) for f, src in found.items()), key=lambda p: p[0])


def _definitions(sources):
    """name -> (order, source) of the last top-level def or class of each name."""
    import ast
    out = {}
    for cell, src in sources:
        try:
            tree = ast.parse(src)
        except SyntaxError:
            continue
        lines = src.splitlines(True)
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                first = min([node.lineno] + [d.lineno for d in node.decorator_list])
                out[node.name] = ((cell, first), "".join(lines[first - 1:node.end_lineno]))
    return out


def save(namespace, sources, limit):
    """Pickle the user's names; keep the blob for the runner to send unless
    it passes limit bytes."""
    modules, defs, values, pieces, saved, lost = [], [], [], [], [], []
    found = None
    for name in sorted(n for n in namespace if isinstance(n, str) and not n.startswith("_")):
        value = namespace[name]
        if isinstance(value, types.ModuleType):
            modules.append((name, value.__name__))
            saved.append(name)
            continue
        if isinstance(value, (type, types.FunctionType)) and getattr(value, "__module__", None) == "__main__":
            if found is None:
                found = _definitions(sources)
            entry = found.get(name)
            if entry is not None and getattr(value, "__name__", None) == name:
                defs.append((entry[0], name, entry[1]))
                saved.append(name)
            else:
                lost.append(name)
            continue
        try:
            kind, parts = _dump(value)
        except Exception:
            lost.append(name)
            continue
        values.append((name, kind, [len(p) for p in parts]))
        pieces += parts
        saved.append(name)
    header = pickle.dumps({"v": VERSION, "modules": modules, "defs": defs, "values": values},
                          protocol=PROTOCOL)
    pieces[:0] = (MAGIC + len(header).to_bytes(8, "big"), header)
    size = sum(len(p) for p in pieces)
    _blob[0] = pieces if size <= limit else []
    pieces = None
    return '{"size":%d,"saved":%s,"lost":%s,"saved_total":%d,"lost_total":%d}' % (
        size, _listing(saved), _listing(lost), len(saved), len(lost))


def _dump(value):
    """A value's kind and pieces (bytes, and byte views of the value's own
    memory: the runner sends them right after the save, before any cell
    runs; a thread of the user's writing to them meanwhile tears only its
    own value, as it could during pickling)."""
    if type(value) in (bytes, bytearray):
        return type(value).__name__, [memoryview(value).cast("B")]
    buffers = []
    if PROTOCOL < 5:
        return "pickle", [pickle.dumps(value, protocol=PROTOCOL)]
    data = pickle.dumps(value, protocol=PROTOCOL, buffer_callback=lambda b: _out_of_band(b, buffers))
    return "pickle", [data] + buffers


def _out_of_band(buffer, buffers):
    """Keep a contiguous buffer out of the pickle (returns False); any
    other is pickled in-band."""
    try:
        view = buffer.raw()
    except BufferError:
        return True
    buffers.append(view)
    return False


def load(namespace, blob):
    """Restore what save kept: modules, then values, then the definitions
    (in cell order), then the values that needed them."""
    env = _parse(blob)
    import importlib
    restored, lost, later = [], [], []
    for name, module in env["modules"]:
        try:
            namespace[name] = importlib.import_module(module)
            restored.append(name)
        except Exception:
            lost.append(name)
    for name, value in env["values"]:
        try:
            namespace[name] = value()
            restored.append(name)
        except Exception:
            later.append((name, value))
    for _, name, source in sorted(env["defs"], key=lambda d: d[0]):
        try:
            exec(compile(source, "<restored %s>" % name, "exec"), namespace)
            restored.append(name)
        except Exception:
            lost.append(name)
    for name, value in later:
        try:
            namespace[name] = value()
            restored.append(name)
        except Exception:
            lost.append(name)
    restored.sort()
    lost.sort()
    return '{"restored":%s,"lost":%s,"restored_total":%d,"lost_total":%d}' % (
        _listing(restored), _listing(lost), len(restored), len(lost))


def _parse(blob):
    """The blob's header, its values as functions that build them."""
    view = memoryview(blob).cast("B")
    if view[:len(MAGIC)] != MAGIC:
        env = pickle.loads(blob)  # version 1
        if not isinstance(env, dict) or env.get("v") != 1:
            raise ValueError("checkpoint format %r is not %d" % (env.get("v") if isinstance(env, dict) else None, VERSION))
        env["values"] = [(name, (lambda d=data: pickle.loads(d))) for name, data in env["values"]]
        return env
    at = len(MAGIC) + 8
    end = at + int.from_bytes(view[len(MAGIC):at], "big")
    env = pickle.loads(view[at:end])
    if not isinstance(env, dict) or env.get("v") != VERSION:
        raise ValueError("checkpoint format %r is not %d" % (env.get("v") if isinstance(env, dict) else None, VERSION))
    values = []
    for name, kind, lengths in env["values"]:
        parts = []
        for n in lengths:
            parts.append(view[end:end + n])
            end += n
        values.append((name, _builder(kind, parts)))
    if end != len(view):
        raise ValueError("checkpoint blob of %d bytes, %d described" % (len(view), end))
    env["values"] = values
    return env


def _builder(kind, parts):
    if kind == "bytes":
        return lambda: bytes(parts[0])
    if kind == "bytearray":
        return lambda: bytearray(parts[0])
    if len(parts) == 1:
        return lambda: pickle.loads(parts[0])
    return lambda: pickle.loads(parts[0], buffers=parts[1:])
