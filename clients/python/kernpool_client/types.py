"""Results of the kernpool API as dataclasses (docs/api.md, docs/openapi.json).

Every byte from the daemon is untrusted: the parsers check each field's
JSON type and raise ProtocolError on a mismatch. Fields a newer daemon adds
are not lost: each object keeps the decoded JSON in ``raw``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Dict, List, Optional

from .errors import ProtocolError

__all__ = [
    "Isolation",
    "KernelResult",
    "Display",
    "Result",
    "ExceptionInfo",
    "ToolCall",
    "KernelInfo",
    "Variable",
    "Variables",
    "Health",
    "Session",
    "FileEntry",
    "FileListing",
]

def _typed(kind: Any, name: str) -> Callable[[Any, str], Any]:
    def parse(v: Any, where: str) -> Any:
        # bool is an int subclass: a boolean where a number belongs is refused.
        if not isinstance(v, kind) or (isinstance(v, bool) and kind is not bool):
            raise ProtocolError("%s: expected %s, got %s" % (where, name, type(v).__name__))
        return float(v) if kind == (int, float) else v
    return parse


def _strs(v: Any, where: str) -> List[str]:
    if not isinstance(v, list) or not all(isinstance(s, str) for s in v):
        raise ProtocolError("%s: expected an array of strings" % where)
    return list(v)


def _obj(v: Any, what: str) -> Dict[str, Any]:
    if not isinstance(v, dict):
        raise ProtocolError("%s: expected a JSON object, got %s" % (what, type(v).__name__))
    return v


def _parsers() -> Dict[str, Callable[[Any, str], Any]]:
    """The parser of each field annotation used below (annotations are
    strings under ``from __future__ import annotations``)."""
    def nested(cls: Any) -> Callable[[Any, str], Any]:
        return lambda v, where: _parse(cls, v, where)

    def nested_list(cls: Any) -> Callable[[Any, str], Any]:
        def parse(v: Any, where: str) -> Any:
            if not isinstance(v, list):
                raise ProtocolError("%s: expected an array" % where)
            return [_parse(cls, x, "%s[%d]" % (where, i)) for i, x in enumerate(v)]
        return parse

    return {
        "str": _typed(str, "a string"),
        "int": _typed(int, "an integer"),
        "Optional[int]": _typed(int, "an integer"),
        "bool": _typed(bool, "a boolean"),
        "float": _typed((int, float), "a number"),
        "List[str]": _strs,
        "Dict[str, Any]": lambda v, where: dict(_obj(v, where)),
        "Any": lambda v, where: v,
        "Isolation": nested(Isolation),
        "Optional[Isolation]": nested(Isolation),
        "Optional[ExceptionInfo]": nested(ExceptionInfo),
        "KernelResult": nested(KernelResult),
        "List[Display]": nested_list(Display),
        "List[Variable]": nested_list(Variable),
        "List[FileEntry]": nested_list(FileEntry),
    }


_PARSERS: Dict[str, Callable[[Any, str], Any]] = {}


def _parse(cls: Any, v: Any, what: str) -> Any:
    """An instance of the dataclass cls from the JSON object v: each known
    member type-checked (absent or null: the field's default), the whole
    object kept in ``raw`` where the class has one."""
    if not _PARSERS:
        _PARSERS.update(_parsers())
    o = _obj(v, what)
    kw: Dict[str, Any] = {}
    for f in fields(cls):
        if f.name == "raw":
            kw["raw"] = o
        elif o.get(f.name) is not None:
            kw[f.name] = _PARSERS[str(f.type)](o[f.name], "%s: field %r" % (what, f.name))
    return cls(**kw)


class _FromJSON:
    """from_json for the dataclasses below."""

    @classmethod
    def from_json(cls: Any, v: Any) -> Any:
        """Parse the JSON object v (ProtocolError when a member has the wrong type)."""
        return _parse(cls, v, cls.__name__)


@dataclass
class Isolation(_FromJSON):
    """What was enforced for a kernel (docs/api.md "kernel.isolation")."""

    mode: str = ""
    uid: int = 0
    namespaces: List[str] = field(default_factory=list)
    seccomp: bool = False
    memory_max: int = 0
    pids_max: int = 0
    cpu_max: float = 0.0
    network: bool = False
    # Pages open to the host's samepage merging (profile memory_merge).
    memory_merge: bool = False
    # What supervises the interpreter as its init: "reaper" or "go"; ""
    # without the init step (docs/api.md "kernel.isolation").
    supervisor: str = ""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)



@dataclass
class KernelResult(_FromJSON):
    """The kernel block of a result."""

    id: str = ""
    mode: str = ""
    reused: bool = False
    execution_count: int = 0
    state_reset: bool = False
    ended: bool = False
    state_preserved: bool = False
    oom_killed: bool = False
    # The key's first cell on a new kernel that restored the checkpoint of
    # the previous one (persist = true; Result.restored and Result.lost).
    restored: bool = False
    isolation: Optional[Isolation] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)



@dataclass
class Display(_FromJSON):
    """One rich display: mime type to value (binary types base64), and metadata."""

    data: Dict[str, Any] = field(default_factory=dict)
    metadata: Dict[str, Any] = field(default_factory=dict)



@dataclass
class ExceptionInfo(_FromJSON):
    """The exception a cell raised, as Jupyter's error message carries it
    (docs/api.md "exception"): ``"".join(traceback)`` is the traceback text."""

    ename: str = ""
    evalue: str = ""
    traceback: List[str] = field(default_factory=list)



@dataclass
class Result(_FromJSON):
    """A settled cell. A failed cell is a Result too: check ``status``."""

    status: str = ""
    output: str = ""
    exit_code: int = 0
    error: str = ""
    # The two streams apart (stderr without the traceback), and the
    # exception structured; output and error keep the combined texts.
    stdout: str = ""
    stderr: str = ""
    exception: Optional[ExceptionInfo] = None
    duration_seconds: float = 0.0
    tool_calls_made: int = 0
    kernel: KernelResult = field(default_factory=KernelResult)
    stdout_truncated: bool = False
    stdout_bytes_total: int = 0
    stderr_truncated: bool = False
    stderr_bytes_total: int = 0
    stdout_spill_path: str = ""
    stdout_spill_name: str = ""
    warning: str = ""
    # After a restore (persist = true): the names brought back and lost.
    restored: List[str] = field(default_factory=list)
    lost: List[str] = field(default_factory=list)
    displays: List[Display] = field(default_factory=list)
    # With outputs_dir: the files the cell created or modified there.
    outputs: List[FileEntry] = field(default_factory=list)
    outputs_truncated: bool = False
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def ok(self) -> bool:
        """True when the cell ran to its end without an exception."""
        return self.status == "success"



@dataclass
class ToolCall(_FromJSON):
    """A tool call a cell made: ``args`` are its keyword arguments, decoded."""

    id: str = ""
    tool: str = ""
    args: Any = None

    @classmethod
    def from_json(cls, v: Any) -> "ToolCall":
        call = _parse(cls, v, "ToolCall")
        if not call.id or not call.tool:
            raise ProtocolError("tool_call event without an id or a tool name")
        return call


@dataclass
class KernelInfo(_FromJSON):
    """One live kernel, as ``ps`` lists it."""

    id: str = ""
    owner: str = ""
    mode: str = ""
    interpreter: str = ""
    cwd: str = ""
    tools: List[str] = field(default_factory=list)
    pid: int = 0
    uid: int = 0
    busy: bool = False
    execution_count: int = 0
    idle_seconds: float = 0.0
    started_at: str = ""
    isolation: Optional[Isolation] = None
    memory_current_bytes: int = 0
    memory_peak_bytes: int = 0
    pids: int = 0
    cpu_seconds: float = 0.0
    dropped_output_bytes: int = 0
    # A warm spare waiting for a new key (owner empty); False for owners' kernels.
    spare: bool = False
    # The explicit session the kernel serves ("" for implicit keying).
    session: str = ""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)



@dataclass
class Variable(_FromJSON):
    """One user-defined name of a kernel's namespace."""

    name: str
    type: str
    repr: str
    len: Optional[int] = None
    bytes: Optional[int] = None



@dataclass
class Variables(_FromJSON):
    """A kernel's namespace listing: at most 1,000 names, sorted, of ``total``."""

    variables: List[Variable] = field(default_factory=list)
    total: int = 0

    def by_name(self) -> Dict[str, Variable]:
        return {v.name: v for v in self.variables}



@dataclass
class FileEntry(_FromJSON):
    """One entry of a listing, or a file a cell wrote (``Result.outputs``:
    ``name`` is then its path relative to the working dir). ``type`` is
    file, dir, symlink (never followed) or other; ``mtime`` RFC 3339, UTC."""

    name: str = ""
    size: int = 0
    type: str = ""
    mtime: str = ""


@dataclass
class FileListing(_FromJSON):
    """A directory of a kernel's working dir: at most 10,000 entries,
    sorted by name; ``truncated`` when it holds more."""

    dir: str = ""
    entries: List[FileEntry] = field(default_factory=list)
    truncated: bool = False


@dataclass
class Health(_FromJSON):
    """The daemon's health report (GET /v1/health)."""

    status: str = ""
    version: str = ""
    kernels: int = 0
    isolation: str = ""
    goroutines: int = 0
    pending_tool_calls: int = 0
    stats: Dict[str, Any] = field(default_factory=dict)
    #: ready, draining, drained or not_ready (GET /v1/ready is the probe).
    state: str = ""
    #: The drain's progress once one began (DrainStatus as a dict).
    drain: Optional[Dict[str, Any]] = None
    #: The node's max_kernels and how many more kernels it may start.
    max_kernels: int = 0
    free_kernels: int = 0
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)



def tool_result_text(value: Any) -> str:
    """The wire form of an on_tool_call return value: a str as is, else its JSON.

    The cell's stub JSON-decodes a result that is JSON, so returning a dict
    or a number gives the cell that dict or number.
    """
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value)
    except (TypeError, ValueError) as e:
        raise TypeError("on_tool_call returned %s, which is neither a str nor JSON-serializable: %s"
                        % (type(value).__name__, e)) from None


@dataclass
class Session(_FromJSON):
    """An explicit session (POST /v1/sessions). ``env_names`` are the names
    of its env, never the values; ``kernel_id`` is empty while it has no
    live kernel (before its first cell, after an eviction or restart)."""

    id: str = ""
    owner: str = ""
    mode: str = ""
    interpreter: str = ""
    cwd: str = ""
    tools: List[str] = field(default_factory=list)
    env_names: List[str] = field(default_factory=list)
    created_at: str = ""
    last_used: str = ""
    kernel_id: str = ""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)
