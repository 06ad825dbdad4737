"""Results of the kernpool API as dataclasses (docs/api.md, docs/openapi.json).

Every byte from the daemon is untrusted: the parsers check each field's
JSON type and raise ProtocolError on a mismatch. Fields a newer daemon adds
are not lost: each object keeps the decoded JSON in ``raw``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from .errors import ProtocolError

__all__ = [
    "Isolation",
    "KernelResult",
    "Display",
    "Result",
    "ToolCall",
    "KernelInfo",
    "Variable",
    "Variables",
    "Health",
]

_MISSING = object()


def _get(obj: Dict[str, Any], key: str, kinds: Any, default: Any, what: str) -> Any:
    v = obj.get(key, _MISSING)
    if v is _MISSING or v is None:
        return default
    # bool is an int subclass: a boolean where a number belongs is refused.
    if isinstance(v, bool) and bool not in (kinds if isinstance(kinds, tuple) else (kinds,)):
        raise ProtocolError("%s: field %r: expected %s, got a boolean" % (what, key, _kind_name(kinds)))
    if not isinstance(v, kinds):
        raise ProtocolError("%s: field %r: expected %s, got %s" % (what, key, _kind_name(kinds), type(v).__name__))
    return v


def _kind_name(kinds: Any) -> str:
    if kinds is str:
        return "a string"
    if kinds is bool:
        return "a boolean"
    if kinds is int:
        return "an integer"
    if kinds == (int, float):
        return "a number"
    if kinds is list:
        return "an array"
    if kinds is dict:
        return "an object"
    return str(kinds)


def _obj(v: Any, what: str) -> Dict[str, Any]:
    if not isinstance(v, dict):
        raise ProtocolError("%s: expected a JSON object, got %s" % (what, type(v).__name__))
    return v


def _strs(obj: Dict[str, Any], key: str, what: str) -> List[str]:
    out = _get(obj, key, list, [], what)
    for s in out:
        if not isinstance(s, str):
            raise ProtocolError("%s: field %r: expected an array of strings" % (what, key))
    return list(out)


@dataclass
class Isolation:
    """What was enforced for a kernel (docs/api.md "kernel.isolation")."""

    mode: str = ""
    uid: int = 0
    namespaces: List[str] = field(default_factory=list)
    seccomp: bool = False
    memory_max: int = 0
    pids_max: int = 0
    cpu_max: float = 0.0
    network: bool = False
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, v: Any) -> "Isolation":
        o = _obj(v, "isolation")
        w = "isolation"
        return cls(
            mode=_get(o, "mode", str, "", w),
            uid=_get(o, "uid", int, 0, w),
            namespaces=_strs(o, "namespaces", w),
            seccomp=_get(o, "seccomp", bool, False, w),
            memory_max=_get(o, "memory_max", int, 0, w),
            pids_max=_get(o, "pids_max", int, 0, w),
            cpu_max=float(_get(o, "cpu_max", (int, float), 0, w)),
            network=_get(o, "network", bool, False, w),
            raw=o,
        )


@dataclass
class KernelResult:
    """The kernel block of a result."""

    id: str = ""
    mode: str = ""
    reused: bool = False
    execution_count: int = 0
    state_reset: bool = False
    ended: bool = False
    state_preserved: bool = False
    oom_killed: bool = False
    isolation: Optional[Isolation] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, v: Any) -> "KernelResult":
        o = _obj(v, "kernel")
        w = "kernel"
        iso = o.get("isolation")
        return cls(
            id=_get(o, "id", str, "", w),
            mode=_get(o, "mode", str, "", w),
            reused=_get(o, "reused", bool, False, w),
            execution_count=_get(o, "execution_count", int, 0, w),
            state_reset=_get(o, "state_reset", bool, False, w),
            ended=_get(o, "ended", bool, False, w),
            state_preserved=_get(o, "state_preserved", bool, False, w),
            oom_killed=_get(o, "oom_killed", bool, False, w),
            isolation=None if iso is None else Isolation.from_json(iso),
            raw=o,
        )


@dataclass
class Display:
    """One rich display: mime type to value (binary types base64), and metadata."""

    data: Dict[str, Any] = field(default_factory=dict)
    metadata: Dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, v: Any) -> "Display":
        o = _obj(v, "display")
        return cls(data=dict(_get(o, "data", dict, {}, "display")),
                   metadata=dict(_get(o, "metadata", dict, {}, "display")))


@dataclass
class Result:
    """A settled cell. A failed cell is a Result too: check ``status``."""

    status: str = ""
    output: str = ""
    exit_code: int = 0
    error: str = ""
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
    displays: List[Display] = field(default_factory=list)
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def ok(self) -> bool:
        """True when the cell ran to its end without an exception."""
        return self.status == "success"

    @classmethod
    def from_json(cls, v: Any) -> "Result":
        o = _obj(v, "result")
        w = "result"
        displays = _get(o, "displays", list, [], w)
        return cls(
            status=_get(o, "status", str, "", w),
            output=_get(o, "output", str, "", w),
            exit_code=_get(o, "exit_code", int, 0, w),
            error=_get(o, "error", str, "", w),
            duration_seconds=float(_get(o, "duration_seconds", (int, float), 0, w)),
            tool_calls_made=_get(o, "tool_calls_made", int, 0, w),
            kernel=KernelResult.from_json(o.get("kernel") or {}),
            stdout_truncated=_get(o, "stdout_truncated", bool, False, w),
            stdout_bytes_total=_get(o, "stdout_bytes_total", int, 0, w),
            stderr_truncated=_get(o, "stderr_truncated", bool, False, w),
            stderr_bytes_total=_get(o, "stderr_bytes_total", int, 0, w),
            stdout_spill_path=_get(o, "stdout_spill_path", str, "", w),
            stdout_spill_name=_get(o, "stdout_spill_name", str, "", w),
            warning=_get(o, "warning", str, "", w),
            displays=[Display.from_json(d) for d in displays],
            raw=o,
        )


@dataclass
class ToolCall:
    """A tool call a cell made: ``args`` are its keyword arguments, decoded."""

    id: str
    tool: str
    args: Any = None

    @classmethod
    def from_json(cls, v: Any) -> "ToolCall":
        o = _obj(v, "call")
        w = "call"
        cid = _get(o, "id", str, "", w)
        tool = _get(o, "tool", str, "", w)
        if not cid or not tool:
            raise ProtocolError("tool_call event without an id or a tool name")
        return cls(id=cid, tool=tool, args=o.get("args"))


@dataclass
class KernelInfo:
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
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, v: Any) -> "KernelInfo":
        o = _obj(v, "kernel")
        w = "kernel"
        iso = o.get("isolation")
        return cls(
            id=_get(o, "id", str, "", w),
            owner=_get(o, "owner", str, "", w),
            mode=_get(o, "mode", str, "", w),
            interpreter=_get(o, "interpreter", str, "", w),
            cwd=_get(o, "cwd", str, "", w),
            tools=_strs(o, "tools", w),
            pid=_get(o, "pid", int, 0, w),
            uid=_get(o, "uid", int, 0, w),
            busy=_get(o, "busy", bool, False, w),
            execution_count=_get(o, "execution_count", int, 0, w),
            idle_seconds=float(_get(o, "idle_seconds", (int, float), 0, w)),
            started_at=_get(o, "started_at", str, "", w),
            isolation=None if iso is None else Isolation.from_json(iso),
            memory_current_bytes=_get(o, "memory_current_bytes", int, 0, w),
            memory_peak_bytes=_get(o, "memory_peak_bytes", int, 0, w),
            pids=_get(o, "pids", int, 0, w),
            cpu_seconds=float(_get(o, "cpu_seconds", (int, float), 0, w)),
            dropped_output_bytes=_get(o, "dropped_output_bytes", int, 0, w),
            raw=o,
        )


@dataclass
class Variable:
    """One user-defined name of a kernel's namespace."""

    name: str
    type: str
    repr: str
    len: Optional[int] = None
    bytes: Optional[int] = None

    @classmethod
    def from_json(cls, v: Any) -> "Variable":
        o = _obj(v, "variable")
        w = "variable"
        return cls(name=_get(o, "name", str, "", w), type=_get(o, "type", str, "", w),
                   repr=_get(o, "repr", str, "", w), len=_get(o, "len", int, None, w),
                   bytes=_get(o, "bytes", int, None, w))


@dataclass
class Variables:
    """A kernel's namespace listing: at most 1,000 names, sorted, of ``total``."""

    variables: List[Variable] = field(default_factory=list)
    total: int = 0

    def by_name(self) -> Dict[str, Variable]:
        return {v.name: v for v in self.variables}

    @classmethod
    def from_json(cls, v: Any) -> "Variables":
        o = _obj(v, "variables")
        return cls(variables=[Variable.from_json(x) for x in _get(o, "variables", list, [], "variables")],
                   total=_get(o, "total", int, 0, "variables"))


@dataclass
class Health:
    """The daemon's health report (GET /v1/health)."""

    status: str = ""
    version: str = ""
    kernels: int = 0
    isolation: str = ""
    goroutines: int = 0
    pending_tool_calls: int = 0
    stats: Dict[str, Any] = field(default_factory=dict)
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, v: Any) -> "Health":
        o = _obj(v, "health")
        w = "health"
        return cls(status=_get(o, "status", str, "", w), version=_get(o, "version", str, "", w),
                   kernels=_get(o, "kernels", int, 0, w), isolation=_get(o, "isolation", str, "", w),
                   goroutines=_get(o, "goroutines", int, 0, w),
                   pending_tool_calls=_get(o, "pending_tool_calls", int, 0, w),
                   stats=dict(_get(o, "stats", dict, {}, w)), raw=o)


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
