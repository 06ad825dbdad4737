"""kernpool checkpoints: save and restore a kernel's user namespace.

Staged beside runner.py as _kernpool_checkpoint.py and imported by the
runner only for "checkpoint.*" requests (docs/design.md, "Lossless
eviction"). Everything here runs inside the kernel: its sandbox, its uid,
its memory cap. The daemon never unpickles anything; it moves the blob
built here as opaque bytes, base64 in bounded chunks over the request and
frame pipes (kernel/checkpoint.go), and enforces every bound again.

The blob is a pickle of plain containers:
  {"v": 1, "modules": [(name, module)], "defs": [(order, name, source)],
   "values": [(name, pickle bytes)]}
Each value is pickled on its own, so one object that does not pickle (or
does not unpickle) loses only its own name. Functions and classes defined
in cells are saved as the source of their top-level def/class statement
(pickle stores them by reference to __main__, which a new kernel lacks);
modules by name, so `import numpy as np` comes back as np.
"""
import base64
import json
import pickle
import sys
import types

VERSION = 1
# The most names listed in a reply (the daemon enforces the same figure).
MAX_NAMES = 1000
MAX_NAME_CHARS = 256

_blob = [b""]      # the last saved blob, read out chunk by chunk
_incoming = []     # chunks of a blob being restored


def handle(op, arg, cells):
    """Run one checkpoint request; returns the reply's stdout text."""
    if op == "checkpoint.save":
        req = json.loads(arg)
        return save(cells.globals, _cell_sources(cells), int(req["limit"]))
    if op == "checkpoint.read":
        offset, size = (int(v) for v in arg.split(","))
        return base64.b64encode(_blob[0][offset:offset + size]).decode("ascii")
    if op == "checkpoint.put":
        _incoming.append(base64.b64decode(arg, validate=True))
        return ""
    if op == "checkpoint.load":
        blob = b"".join(_incoming)
        _incoming.clear()
        return load(cells.globals, blob)
    raise ValueError("unknown checkpoint op %r" % op[:64])


def _listing(names):
    return [n[:MAX_NAME_CHARS] for n in names[:MAX_NAMES]]


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
    """Pickle the user's names; keep the blob for checkpoint.read unless it
    passes limit bytes."""
    modules, defs, values, saved, lost = [], [], [], [], []
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
            values.append((name, pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)))
            saved.append(name)
        except Exception:
            lost.append(name)
    blob = pickle.dumps({"v": VERSION, "modules": modules, "defs": defs, "values": values},
                        protocol=pickle.HIGHEST_PROTOCOL)
    values = None
    _blob[0] = blob if len(blob) <= limit else b""
    return json.dumps({"size": len(blob), "saved": _listing(saved), "lost": _listing(lost),
                       "saved_total": len(saved), "lost_total": len(lost)})


def load(namespace, blob):
    """Restore what save kept: modules, then values, then the definitions
    (in cell order), then the values that needed them."""
    env = pickle.loads(blob)
    if not isinstance(env, dict) or env.get("v") != VERSION:
        raise ValueError("checkpoint format %r is not %d" % (env.get("v") if isinstance(env, dict) else None, VERSION))
    import importlib
    restored, lost, later = [], [], []
    for name, module in env["modules"]:
        try:
            namespace[name] = importlib.import_module(module)
            restored.append(name)
        except Exception:
            lost.append(name)
    for name, data in env["values"]:
        try:
            namespace[name] = pickle.loads(data)
            restored.append(name)
        except Exception:
            later.append((name, data))
    for _, name, source in sorted(env["defs"], key=lambda d: d[0]):
        try:
            exec(compile(source, "<restored %s>" % name, "exec"), namespace)
            restored.append(name)
        except Exception:
            lost.append(name)
    for name, data in later:
        try:
            namespace[name] = pickle.loads(data)
            restored.append(name)
        except Exception:
            lost.append(name)
    restored.sort()
    lost.sort()
    return json.dumps({"restored": _listing(restored), "lost": _listing(lost),
                       "restored_total": len(restored), "lost_total": len(lost)})
