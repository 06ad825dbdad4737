"""kernpool runner, part 3: what a tenant sees of an exception.

Staged beside runner.py and loaded by it on the first error. An exception
becomes its traceback text plus its structured form, as Jupyter's error
message carries it: the exception's class name (ename), its str() (evalue)
and the traceback as a list of entries whose concatenation is the text
(a header, one entry per frame, the exception line; chained exceptions
likewise). kernpool's own frames (the runner and the files staged beside
it: the tool stub, the shell-line helpers) are left out, and the staging
dir, a host path, is replaced by STAGING_NAME wherever it appears. Every
part is capped in UTF-8 bytes (kernel/caps.go: TracebackBytes, ErrorNameBytes).
"""
import os
import traceback

# What the staging dir's path becomes in a tenant-visible text.
STAGING_NAME = "<kernel-dir>"
# Entries kept of a longer traceback list: the first and the last ones,
# around one entry saying how many were left out.
_MAX_ENTRIES = 100
_HEAD_ENTRIES = 40
# Cap of ename in bytes (kernel/caps.go ErrorNameBytes).
NAME_LIMIT = 256


def _group(n):
    return "{:,}".format(n)


def cap_text(text, limit):
    """Cap text at limit UTF-8 bytes, notice included: head 40 %,
    the reference's truncation notice, tail 60 %, cut on character
    boundaries (envscrub.TruncationNotice words the same notice)."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        return text
    if limit < 128:  # no room for the notice: the head alone
        return data[:limit].decode("utf-8", "ignore")
    room = limit - 96  # the notice's longest rendering
    head = data[:room * 2 // 5].decode("utf-8", "ignore")
    tail = data[len(data) - (room - room * 2 // 5):].decode("utf-8", "ignore")
    kept = len(head.encode("utf-8", "surrogatepass")) + len(tail.encode("utf-8", "surrogatepass"))
    notice = "\n\n... [OUTPUT TRUNCATED - %s bytes omitted out of %s total] ...\n\n" % (
        _group(len(data) - kept), _group(len(data)))
    return head + notice + tail


def _own_files(here):
    """The runner's own files: runner.py and what is staged beside it
    under a kernpool name (the tool stub included)."""
    own = {os.path.join(here, "runner.py"), os.path.join(here, "kernpool_tools.py")}
    try:
        for name in os.listdir(here):
            if name.startswith("_kernpool_") and name.endswith(".py"):
                own.add(os.path.join(here, name))
    except OSError:
        pass
    return own


def _safe_str(value):
    try:
        return str(value)
    except BaseException:
        return "<exception str() failed>"


def _cell_tb(exc, handler_code):
    """exc's traceback from the cell's first frame on, without the
    runner's SIGINT handler (an interrupt's last frame)."""
    tb = exc.__traceback__
    while tb is not None and not tb.tb_frame.f_code.co_filename.startswith("<cell-"):
        tb = tb.tb_next
    last, prev = tb, None
    while last is not None and last.tb_next is not None:
        prev, last = last, last.tb_next
    if last is not None and last.tb_frame.f_code is handler_code:
        if prev is None:
            return None
        prev.tb_next = None
    return tb


def _prune(te, own, seen, top=False):
    """Drop own frames from te and its chain; a chained exception that
    happened entirely inside kernpool's files is dropped whole."""
    if te is None or id(te) in seen:
        return te
    seen.add(id(te))
    frames = [f for f in te.stack if f.filename not in own]
    internal = bool(te.stack) and not frames
    te.stack = traceback.StackSummary.from_list(frames)
    te.__cause__ = _prune(te.__cause__, own, seen)
    te.__context__ = _prune(te.__context__, own, seen)
    return None if internal and not top else te


def _before(code):
    """A one-frame stack at code's first line: where an interrupt that
    landed between two parts of a cell stopped it."""
    line = next((ln for _, _, ln in code.co_lines() if ln), code.co_firstlineno)
    return traceback.StackSummary.from_list([traceback.FrameSummary(code.co_filename, line, "<module>")])


def _entries(exc, handler_code, own, pending=None):
    tb = _cell_tb(exc, handler_code)
    te = traceback.TracebackException(type(exc), exc, tb)
    if tb is None and pending is not None and isinstance(exc, KeyboardInterrupt):
        te.stack = _before(pending)
    _prune(te, own, set(), top=True)
    return list(te.format())


def _fair_share(sizes, budget):
    """The largest per-entry cap under which the entries fit in budget
    bytes: short entries stay whole and leave their room to long ones."""
    left = len(sizes)
    for size in sorted(sizes):
        share = max(budget, 0) // left
        if size > share:
            return share
        budget -= size
        left -= 1
    return max(budget, 0)


def _hide(text, here):
    return text.replace(here, STAGING_NAME) if here and here in text else text


def describe(exc, handler_code, here, limit, pending=None):
    """(text, ename, evalue, entries) of exc, each capped: text and evalue
    at limit bytes, ename at NAME_LIMIT, the entries together (with one
    separator byte each) at limit."""
    own = _own_files(here)
    try:
        entries = _entries(exc, handler_code, own, pending)
    except BaseException as failure:  # a hostile __str__ or __repr__
        entries = ["%s: <traceback could not be formatted: %s>\n" % (type(exc).__name__, type(failure).__name__)]
    entries = [_hide(e, here) for e in entries]
    text = cap_text("".join(entries), limit)
    if len(entries) > _MAX_ENTRIES:
        tail = _MAX_ENTRIES - _HEAD_ENTRIES
        gap = "  [... %s traceback entries omitted ...]\n" % _group(len(entries) - _MAX_ENTRIES)
        entries = entries[:_HEAD_ENTRIES] + [gap] + entries[-tail:]
    each = _fair_share([len(e.encode("utf-8", "surrogatepass")) for e in entries], limit - len(entries))
    entries = [cap_text(e, each).replace("\x00", "\ufffd") for e in entries]
    ename = cap_text(type(exc).__name__, NAME_LIMIT)
    evalue = cap_text(_hide(_safe_str(exc), here), limit)
    return text, ename, evalue, entries
