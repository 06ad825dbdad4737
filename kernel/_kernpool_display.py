"""kernpool runner, part 2: what it shows of a cell besides its output:
rich displays, a SystemExit's text and the variables listing.

Staged beside runner.py and loaded by it on first use (most cells display
nothing and raise nothing), by path: cells may change sys.path. Displays follow IPython's
_repr_*_ protocol and go out at once as D frames (kernel/doc.go) through the
emit function the runner passes in; caps come from KERNPOOL_OUTPUT_CAPS
(kernel/caps.go).
"""
import io
import sys

_MIME_METHODS = (
    ("image/png", "_repr_png_"), ("image/jpeg", "_repr_jpeg_"),
    ("image/svg+xml", "_repr_svg_"), ("text/html", "_repr_html_"),
    ("text/markdown", "_repr_markdown_"), ("text/latex", "_repr_latex_"),
    ("application/json", "_repr_json_"),
)
_BINARY_MIMES = ("image/png", "image/jpeg")


def safe_repr(value):
    try:
        return repr(value)
    except BaseException:
        return "<unrepresentable>"


def _rich_method(obj, name):
    # Looked up on the type, as IPython does: an object whose __getattr__
    # answers every name is not a display.
    if getattr(type(obj), name, None) is None:
        return None
    return getattr(obj, name, None)


def _normalize(mime, value):
    if mime in _BINARY_MIMES:
        if isinstance(value, (bytes, bytearray, memoryview)):
            import binascii
            return binascii.b2a_base64(bytes(value), newline=False).decode("ascii")
        return value if isinstance(value, str) else None
    if mime == "application/json" or mime.endswith("+json"):
        return value
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    return value if isinstance(value, str) else str(value)


class Displays:
    """Rich displays (IPython's _repr_*_ protocol), sent as they happen."""

    def __init__(self, limit, cell_limit, emit):
        self.limit = limit            # one display's JSON, bytes
        self.cell_limit = cell_limit  # all of one cell's
        self.emit = emit              # writes one display's JSON as a D frame
        self.used = 0
        self.dropped = 0

    def reset(self):
        self.used = self.dropped = 0

    def bundle(self, obj):
        data, meta = {}, {}
        method = _rich_method(obj, "_repr_mimebundle_")
        if method is not None:
            try:
                got = method(include=None, exclude=None)
            except TypeError:
                got = method()
            except Exception:
                got = None
            if isinstance(got, tuple) and len(got) == 2:
                got, more = got
                meta.update(more if isinstance(more, dict) else {})
            if isinstance(got, dict):
                data.update(got)
        for mime, name in _MIME_METHODS:
            method = None if mime in data else _rich_method(obj, name)
            if method is None:
                continue
            try:
                value = method()
            except Exception:
                continue
            if isinstance(value, tuple) and len(value) == 2:
                value, more = value
                if isinstance(more, dict):
                    meta[mime] = more
            if value is not None:
                data[mime] = value
        if "text/plain" not in data:
            data["text/plain"] = safe_repr(obj)
        return {m: v for m, v in ((m, _normalize(m, v)) for m, v in data.items()) if v is not None}, meta

    def publish(self, data, meta):
        import json
        try:
            body = json.dumps({"data": data, "metadata": meta}).encode("ascii")
        except (TypeError, ValueError):
            self.dropped += 1
            return
        if len(body) > self.limit or self.used + len(body) > self.cell_limit:
            self.dropped += 1
            return
        self.used += len(body)
        self.emit(body)

    def display(self, objs, metadata):
        for obj in objs:
            data, meta = self.bundle(obj)
            if isinstance(metadata, dict):
                meta.update(metadata)
            self.publish(data, meta)

    def hook(self, value):
        """The last expression's value: a rich display, else its repr."""
        import builtins
        builtins._ = None
        data, meta = self.bundle(value)
        if len(data) > 1:
            self.publish(data, meta)
        else:
            sys.stdout.write(data["text/plain"] + "\n")
        builtins._ = value

    def flush_figures(self):
        """Open matplotlib figures become image/png displays, then close."""
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is None:
            return
        for num in plt.get_fignums():
            fig = plt.figure(num)
            buf = io.BytesIO()
            fig.savefig(buf, format="png", bbox_inches="tight")
            self.publish({"text/plain": safe_repr(fig), "image/png": _normalize("image/png", buf.getvalue())}, {})
        plt.close("all")

    def pyplot_spec(self, hook, name, path, target):
        """The module spec of matplotlib.pyplot (hook: the runner's finder,
        skipped), its loader wrapped so show() becomes flush_figures()."""
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is hook or find is None:
                continue
            spec = find(name, path, target)
            if spec is None or spec.loader is None:
                continue
            loader_exec = spec.loader.exec_module

            def exec_module(module):
                loader_exec(module)
                module.show = lambda *args, **kwargs: self.flush_figures()
            spec.loader.exec_module = exec_module
            return spec
        return None


def exit_code(code):
    """sys.exit's argument as a process exit code (as Python's own exit)."""
    if code is None:
        return 0
    if isinstance(code, int) and not isinstance(code, bool):
        return code
    if isinstance(code, bool):
        return int(code)
    sys.stderr.write(str(code) + "\n")
    return 1


def variables(namespace, max_names, max_repr):
    """The user's names: type, a bounded repr and a size where cheap."""
    import reprlib
    short = reprlib.Repr()
    short.maxstring = short.maxother = max_repr
    names = sorted(n for n in namespace if not n.startswith("_"))
    out = []
    for name in names[:max_names]:
        value = namespace[name]
        kind = type(value)
        entry = {"name": name, "type": kind.__qualname__ if kind.__module__ == "builtins"
                 else kind.__module__ + "." + kind.__qualname__}
        try:
            entry["repr"] = short.repr(value)[:max_repr]
        except Exception:
            entry["repr"] = "<unrepresentable>"
        if isinstance(value, (str, bytes, bytearray, list, tuple, dict, set, frozenset)):
            entry["len"] = len(value)
        nbytes = getattr(value, "nbytes", None) if not isinstance(value, type) else None
        if isinstance(nbytes, int) and not isinstance(nbytes, bool):
            entry["bytes"] = nbytes
        out.append(entry)
    import json
    return json.dumps({"variables": out, "total": len(names)})
