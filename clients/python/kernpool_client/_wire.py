"""What the sync and async clients share: the socket rules, request bodies,
paths, and the parsing of answers and stream events (all bounded)."""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

if TYPE_CHECKING:
    import ssl
from urllib.parse import quote, urlsplit

from .errors import APIError, ProtocolError
from .types import Display, Result, ToolCall, tool_result_text

# Bounds on what the daemon may make this process hold. A result is under
# 1 MiB of output plus at most 4 MiB of displays (docs/api.md "Caps"); one
# display event is at most 4 MiB of JSON. 16 MiB leaves room for JSON
# escaping; a larger line is a protocol error, never an allocation.
DEFAULT_MAX_LINE_BYTES = 16 << 20
# Error bodies are one short JSON object.
MAX_ERROR_BYTES = 1 << 20
# A spill file is at most output.spill_cap (5,000,000 bytes by default).
DEFAULT_MAX_SPILL_BYTES = 64 << 20
# Tool calls one execute runs at once (the daemon's budget is 50 per cell
# by default); past it a call is refused, so a daemon cannot make this
# process start unbounded threads or tasks.
MAX_CONCURRENT_TOOL_CALLS = 64
TOO_MANY_TOOL_CALLS = {"error": "the client runs %d tool calls at once; retry later" % MAX_CONCURRENT_TOOL_CALLS}
# HTTP framing of the async client: one header line, the number of header
# lines, and one chunk-size line.
MAX_HEADER_LINE = 8 << 10
MAX_HEADERS = 100

Number = Union[int, float]
Timeout = Union[Number, str, None]


class Network:
    """Where a network client connects: host, port, the TLS context (None
    for plain http on loopback) and the Host header."""

    def __init__(self, url: str, token: Optional[str], ca_file: Optional[str], cert_file: Optional[str],
                 key_file: Optional[str], ssl_context: Optional["ssl.SSLContext"]) -> None:
        u = urlsplit(url)
        if u.scheme not in ("https", "http") or not u.hostname or u.path not in ("", "/") or u.query:
            raise ValueError("url must be https://host:port (a node's listener or a router), got %r" % url)
        if u.scheme == "http" and not _loopback(u.hostname):
            raise ValueError("%s is plain http to a host beyond loopback; use https" % url)
        if (cert_file is None) != (key_file is None):
            raise ValueError("a client certificate needs both cert_file and key_file")
        if token is not None and (not token or any(ord(c) < 0x21 or ord(c) > 0x7e for c in token)):
            raise ValueError("token must be printable ASCII without spaces")
        self.host = u.hostname
        self.port = u.port or (443 if u.scheme == "https" else 80)
        self.host_header = u.netloc.rsplit("@", 1)[-1]
        self.token = token
        self.ssl: Optional["ssl.SSLContext"] = None
        if u.scheme == "https":
            import ssl
            ctx = ssl_context
            if ctx is None:
                ctx = ssl.create_default_context(cafile=ca_file)
                ctx.minimum_version = ssl.TLSVersion.TLSv1_2
                if cert_file is not None:
                    ctx.load_cert_chain(cert_file, key_file)
            ctx.set_alpn_protocols(["http/1.1"])  # the node serves HTTP/1.1 only
            self.ssl = ctx

    def headers(self) -> Dict[str, str]:
        h = {"Host": self.host_header}
        if self.token:
            h["Authorization"] = "Bearer " + self.token
        return h


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    import ipaddress
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Settings:
    """What both clients take: the socket (default_socket() when None), or
    a network URL (``https://host:port``: a node's listener or a router)
    with a bearer ``token`` and/or a client certificate (``cert_file``,
    ``key_file``) and the CA that verifies the node (``ca_file``, default
    the system's; or a ready ``ssl_context``); the timeout of every
    request but execute, the connect timeout, and the bound on one answer
    or stream event. Everything else is the same on either transport."""

    def __init__(self, socket: Optional[str] = None, *, url: Optional[str] = None, token: Optional[str] = None,
                 ca_file: Optional[str] = None, cert_file: Optional[str] = None, key_file: Optional[str] = None,
                 ssl_context: Optional["ssl.SSLContext"] = None, timeout: float = 60.0,
                 connect_timeout: float = 5.0, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        if url is not None and socket is not None:
            raise ValueError("give a socket or a url, not both")
        self.network: Optional[Network] = None
        if url is not None:
            self.network = Network(url, token, ca_file, cert_file, key_file, ssl_context)
            self.socket = url  # what errors name
        else:
            self.socket = socket or default_socket()
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.max_line_bytes = max_line_bytes

    def _headers(self) -> Dict[str, str]:
        return self.network.headers() if self.network is not None else {"Host": "kernpool"}

    def __repr__(self) -> str:
        return "%s(%s=%r)" % (type(self).__name__, "url" if self.network else "socket", self.socket)


def default_socket(env: Optional[Mapping[str, str]] = None) -> str:
    """The socket the CLI dials by default (cmd/kernpool/paths.go):
    $KERNPOOL_SOCKET, else /run/kernpool/kernpool.sock as root, else
    $XDG_RUNTIME_DIR/kernpool/kernpool.sock, else
    $TMPDIR (or /tmp)/kernpool-<uid>/kernpool.sock."""
    env = os.environ if env is None else env
    s = env.get("KERNPOOL_SOCKET", "")
    if s:
        return s
    uid = os.getuid() if hasattr(os, "getuid") else -1
    if uid == 0 and sys.platform != "win32":
        base = "/run/kernpool"
    elif env.get("XDG_RUNTIME_DIR", ""):
        base = os.path.join(env["XDG_RUNTIME_DIR"], "kernpool")
    elif uid >= 0:
        base = os.path.join(env.get("TMPDIR", "") or "/tmp", "kernpool-%d" % uid)
    else:
        import tempfile
        base = os.path.join(tempfile.gettempdir(), "kernpool")
    return os.path.join(base, "kernpool.sock")


def execute_body(code: str, owner: Optional[str], mode: Optional[str], tools: Optional[Sequence[str]],
                 timeout: Timeout, reset: bool, interpreter: Optional[str], cwd: Optional[str],
                 passthrough: Optional[Sequence[str]], limits: Optional[Mapping[str, Any]],
                 max_tool_calls: Optional[int], session: Optional[str] = None,
                 env: Optional[Mapping[str, str]] = None, outputs_dir: Optional[str] = None) -> Dict[str, Any]:
    """The JSON body of POST /v1/execute (always streaming)."""
    if not isinstance(code, str):
        raise TypeError("code must be a str, not %s" % type(code).__name__)
    body: Dict[str, Any] = {"code": code, "stream": True}
    if owner:
        body["owner"] = owner
    if mode:
        body["mode"] = mode
    if tools:
        if isinstance(tools, str):
            raise TypeError("tools must be a sequence of tool names, not a str")
        body["tools"] = list(tools)
    if timeout is not None:
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float, str)):
            raise TypeError("timeout must be seconds (a number) or a duration string such as '30s'")
        body["timeout"] = timeout
    if reset:
        body["reset"] = True
    if interpreter:
        body["interpreter"] = interpreter
    if cwd:
        body["cwd"] = cwd
    if passthrough:
        body["passthrough"] = list(passthrough)
    if limits:
        body["limits"] = dict(limits)
    if max_tool_calls:
        body["max_tool_calls"] = max_tool_calls
    if session:
        body["session"] = session
    if env:
        body["env"] = env_map(env)
    if outputs_dir:
        body["outputs_dir"] = outputs_dir
    return body


def env_map(env: Mapping[str, str]) -> Dict[str, str]:
    """An env argument as the API takes it: names and values are str."""
    out = dict(env)
    for k, v in out.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise TypeError("env maps str names to str values")
    return out


def session_body(owner: Optional[str], mode: Optional[str], interpreter: Optional[str], cwd: Optional[str],
                 tools: Optional[Sequence[str]], env: Optional[Mapping[str, str]]) -> Dict[str, Any]:
    """The JSON body of POST /v1/sessions."""
    body: Dict[str, Any] = {}
    for key, v in (("owner", owner), ("mode", mode), ("interpreter", interpreter), ("cwd", cwd)):
        if v:
            body[key] = v
    if tools:
        if isinstance(tools, str):
            raise TypeError("tools must be a sequence of tool names, not a str")
        body["tools"] = list(tools)
    if env:
        body["env"] = env_map(env)
    return body


def sessions_path(owner: Optional[str]) -> str:
    return "/v1/sessions" + ("?owner=" + quote(owner, safe="") if owner else "")


def kernel_of(kernels: Sequence[Any], owner: str, mode: Optional[str]) -> str:
    """The live kernel of owner in mode (default "default") that ran a cell
    most recently, as ``kernpool vars --owner`` picks it; explicit
    sessions' kernels are not the owner's (address them by session)."""
    mode = mode or "default"
    best = None
    for k in kernels:
        if k.owner == owner and k.mode == mode and not k.session and (best is None or k.idle_seconds < best.idle_seconds):
            best = k
    if best is None:
        raise APIError("not_found", "no live kernel of owner %r in mode %r" % (owner, mode))
    return best.id


def variables_target(kernel_id: Optional[str], owner: Optional[str], session: Optional[str]) -> None:
    if sum(x is not None for x in (kernel_id, owner, session)) != 1:
        raise ValueError("variables takes exactly one of kernel_id, owner and session")


def seg(s: str) -> str:
    """One path segment, escaped (an id or owner can name no other endpoint)."""
    if not isinstance(s, str) or not s:
        raise ValueError("a kernel id, owner or spill name must be a non-empty str")
    return quote(s, safe="")


def interrupt_path(kernel_id: Optional[str], owner: Optional[str], mode: Optional[str]) -> str:
    if (kernel_id is None) == (owner is None):
        raise ValueError("interrupt takes exactly one of kernel_id and owner")
    if kernel_id is not None:
        return "/v1/kernels/%s/interrupt" % seg(kernel_id)
    path = "/v1/owners/%s/interrupt" % seg(owner or "")
    if mode:
        path += "?mode=" + quote(mode, safe="")
    return path


def decode_json(raw: bytes, what: str) -> Any:
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise ProtocolError("%s: not JSON: %s" % (what, e)) from None


def object_of(v: Any, what: str) -> Dict[str, Any]:
    """v, a decoded answer, when it is a JSON object (else ProtocolError)."""
    if not isinstance(v, dict):
        raise ProtocolError("%s: expected a JSON object" % what)
    return v


def json_object(raw: bytes, what: str) -> Dict[str, Any]:
    """raw decoded as a JSON object (ProtocolError for any other JSON)."""
    return object_of(decode_json(raw, what), what)


def ready_state(v: Any) -> str:
    """The state of a decoded GET /v1/ready answer."""
    if not isinstance(v, dict) or not isinstance(v.get("state"), str):
        raise ProtocolError("ready: expected {\"state\": ...}")
    return v["state"]


DRAIN_WAIT = "/v1/drain?wait=true"


def drain_line(line: bytes, limit: int, last: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """The DrainStatus of one line of POST /v1/drain?wait=true, or last
    for a blank line."""
    if len(line) > limit and not line.endswith(b"\n"):
        raise ProtocolError("drain: a progress line is over %d bytes" % limit)
    if not line.strip():
        return last
    st = json_object(line, "drain")
    if not isinstance(st.get("state"), str):
        raise ProtocolError("drain: a progress line without its state")
    return st


def api_error(status: int, raw: bytes, retry_after: Optional[str]) -> APIError:
    """The APIError of a non-200 answer (a body that is not the API's error
    object still gives one, with code internal)."""
    ra: Optional[int] = None
    if retry_after is not None and retry_after.strip().isdigit():
        ra = int(retry_after.strip())
    try:
        body = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), str) and isinstance(body.get("code"), str):
        return APIError(body["code"], body["error"], status, ra)
    text = raw[:200].decode("utf-8", "replace").strip()
    return APIError("internal", "HTTP %d: %s" % (status, text), status, ra)


class StreamState:
    """Parses the NDJSON events of one streamed execute, in order, and calls
    the output callbacks; tool calls are handed to the caller."""

    def __init__(self, on_stdout: Optional[Callable[[str], Any]], on_stderr: Optional[Callable[[str], Any]],
                 on_display: Optional[Callable[[Display], Any]]) -> None:
        self.on_stdout = on_stdout
        self.on_stderr = on_stderr
        self.on_display = on_display

    @staticmethod
    def parse(line: bytes) -> Dict[str, Any]:
        ev = decode_json(line, "stream event")
        if not isinstance(ev, dict) or not isinstance(ev.get("event"), str):
            raise ProtocolError("stream event is not an object with an \"event\" name")
        return ev

    def output_callback(self, ev: Dict[str, Any]) -> Optional[Any]:
        """The callback and argument of a stdout/stderr/display event, or None
        for other events (the caller handles tool_call, result, error; unknown
        events are skipped so that an older client keeps working)."""
        kind = ev["event"]
        if kind in ("stdout", "stderr"):
            text = ev.get("text", "")
            if not isinstance(text, str):
                raise ProtocolError("%s event: \"text\" is not a string" % kind)
            cb = self.on_stdout if kind == "stdout" else self.on_stderr
            return (cb, text) if cb is not None else None
        if kind == "display":
            if self.on_display is None:
                return None
            return (self.on_display, Display.from_json(ev.get("display")))
        return None


def final_of(ev: Dict[str, Any]) -> Optional[Result]:
    """The Result of a result event; raises the APIError of an error event;
    None for other events."""
    kind = ev["event"]
    if kind == "result":
        if ev.get("result") is None:
            raise ProtocolError("result event without a result")
        return Result.from_json(ev["result"])
    if kind == "error":
        msg, code = ev.get("error"), ev.get("code")
        if not isinstance(msg, str) or not isinstance(code, str):
            raise ProtocolError("error event without a message or code")
        raise APIError(code, msg, None)
    return None


def tool_call_of(ev: Dict[str, Any]) -> Optional[ToolCall]:
    if ev["event"] != "tool_call":
        return None
    return ToolCall.from_json(ev.get("call"))


def tool_answer(call: ToolCall, handler: Optional[Callable[[ToolCall], Any]], value: Any,
                exc: Optional[BaseException]) -> Dict[str, str]:
    """The body of POST /v1/tool-calls/{id} for a handler's return value or exception."""
    if handler is None:
        return {"error": "this client has no on_tool_call handler (tool %s)" % call.tool}
    if exc is not None:
        return {"error": str(exc) or type(exc).__name__}
    try:
        return {"result": tool_result_text(value)}
    except TypeError as e:
        return {"error": str(e)}


def str_list(v: Any, key: str, what: str) -> List[str]:
    if not isinstance(v, dict) or not isinstance(v.get(key), list) or not all(isinstance(s, str) for s in v[key]):
        raise ProtocolError("%s: expected {\"%s\": [strings]}" % (what, key))
    return list(v[key])


def int_field(v: Any, key: str, what: str) -> int:
    if not isinstance(v, dict) or not isinstance(v.get(key), int) or isinstance(v.get(key), bool):
        raise ProtocolError("%s: expected {\"%s\": integer}" % (what, key))
    return int(v[key])
