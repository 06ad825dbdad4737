"""The blocking client: HTTP/1.1 over the daemon's Unix socket with http.client."""

from __future__ import annotations

import http.client
import json
import socket as _socket
import threading
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from . import _wire
from ._files import FilesMixin
from .errors import APIError, DaemonUnavailable, ProtocolError
from .types import Display, Health, KernelInfo, Result, Session, ToolCall, Variables

__all__ = ["Client"]


class _UnixConnection(http.client.HTTPConnection):
    """An HTTPConnection that dials a Unix socket (the host name is ignored)."""

    def __init__(self, path: str, timeout: Optional[float]) -> None:
        super().__init__("kernpool", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            s.settimeout(self.timeout)
            s.connect(self._path)
        except BaseException:
            s.close()
            raise
        self.sock = s


class Client(_wire.Settings, FilesMixin):
    """A client of the kernpool daemon on its Unix socket, or on a node's
    network listener or a router (``url``, ``token``, ``cert_file``,
    ``key_file``, ``ca_file``: see Settings).

    ``socket`` defaults to the CLI's rule (``$KERNPOOL_SOCKET``, else
    ``/run/kernpool/kernpool.sock`` as root, else
    ``$XDG_RUNTIME_DIR/kernpool/kernpool.sock``, else
    ``/tmp/kernpool-<uid>/kernpool.sock``). Each request uses its own
    connection, so one Client may be shared between threads.

    ``timeout`` bounds every request but ``execute`` (whose cell is bounded
    by its own timeout); ``max_line_bytes`` bounds one answer or stream
    event: a daemon that sends more gets a ProtocolError, not memory.
    """

    # -- transport ---------------------------------------------------------

    def _connection(self) -> http.client.HTTPConnection:
        net = self.network
        if net is None:
            return _UnixConnection(self.socket, self.connect_timeout)
        if net.ssl is not None:
            return http.client.HTTPSConnection(net.host, net.port, timeout=self.connect_timeout, context=net.ssl)
        return http.client.HTTPConnection(net.host, net.port, timeout=self.connect_timeout)

    def _send(self, method: str, path: str, body: Optional[Dict[str, Any]],
              timeout: Optional[float]) -> "tuple[http.client.HTTPConnection, http.client.HTTPResponse]":
        conn = self._connection()
        try:
            conn.connect()
        except OSError as e:
            conn.close()
            raise DaemonUnavailable(self.socket, e) from None
        try:
            conn.sock.settimeout(timeout)
            headers = self._headers()
            headers["Accept"] = "application/json, application/x-ndjson"
            data = None
            if body is not None:
                data = json.dumps(body).encode("utf-8")
                headers["Content-Type"] = "application/json"
            conn.request(method, path, body=data, headers=headers)
            return conn, conn.getresponse()
        except _socket.timeout:
            conn.close()
            raise ProtocolError("%s %s: no answer within %ss" % (method, path, timeout)) from None
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            raise ProtocolError("%s %s: %s" % (method, path, e or type(e).__name__)) from None

    def _read(self, resp: http.client.HTTPResponse, limit: int, what: str) -> bytes:
        try:
            raw = resp.read(limit + 1)
        except (OSError, http.client.HTTPException) as e:
            raise ProtocolError("%s: reading the answer: %s" % (what, e or type(e).__name__)) from None
        if len(raw) > limit:
            raise ProtocolError("%s: the answer is over %d bytes" % (what, limit))
        return raw

    def _check(self, resp: http.client.HTTPResponse, what: str) -> None:
        if resp.status != 200:
            raw = self._read(resp, _wire.MAX_ERROR_BYTES, what)
            raise _wire.api_error(resp.status, raw, resp.getheader("Retry-After"))

    def _json(self, method: str, path: str, body: Optional[Dict[str, Any]] = None) -> Any:
        conn, resp = self._send(method, path, body, self.timeout)
        try:
            self._check(resp, path)
            return _wire.decode_json(self._read(resp, self.max_line_bytes, path), path)
        finally:
            conn.close()

    # -- cells ---------------------------------------------------------------

    def execute(self, code: str, *, owner: Optional[str] = None, mode: Optional[str] = None,
                tools: Optional[Sequence[str]] = None, timeout: _wire.Timeout = None, reset: bool = False,
                on_stdout: Optional[Callable[[str], Any]] = None,
                on_stderr: Optional[Callable[[str], Any]] = None,
                on_display: Optional[Callable[[Display], Any]] = None,
                on_tool_call: Optional[Callable[[ToolCall], Any]] = None,
                interpreter: Optional[str] = None, cwd: Optional[str] = None,
                passthrough: Optional[Sequence[str]] = None, limits: Optional[Mapping[str, Any]] = None,
                max_tool_calls: Optional[int] = None, session: Optional[str] = None,
                env: Optional[Mapping[str, str]] = None, outputs_dir: Optional[str] = None) -> Result:
        """Run one cell in the kernel of (owner, mode, interpreter, cwd, tools).

        The cell's output is streamed: ``on_stdout(text)``, ``on_stderr(text)``
        and ``on_display(Display)`` are called in order, on this thread, as
        the cell writes. Each tool call runs ``on_tool_call(ToolCall)`` on a
        thread of its own (calls may be concurrent); its return value is the
        tool's result (a str as is, anything else as JSON) and an exception
        it raises makes the call raise ToolError in the cell. Without
        ``on_tool_call`` the cell's tool calls fail.

        ``session`` runs the cell in an explicit session (create_session);
        ``env`` sets environment values for this cell only.

        A failed cell is a Result (check ``status``); APIError is raised
        when the daemon refuses the request. An exception in a callback (or
        KeyboardInterrupt) closes the connection, which interrupts the cell.
        """
        body = _wire.execute_body(code, owner, mode, tools, timeout, reset, interpreter, cwd,
                                  passthrough, limits, max_tool_calls, session, env, outputs_dir)
        conn, resp = self._send("POST", "/v1/execute", body, None)
        try:
            self._check(resp, "execute")
            ctype = resp.getheader("Content-Type", "")
            if not ctype.startswith("application/x-ndjson"):
                return Result.from_json(_wire.decode_json(self._read(resp, self.max_line_bytes, "execute"), "execute"))
            return self._read_stream(resp, _wire.StreamState(on_stdout, on_stderr, on_display), on_tool_call)
        finally:
            conn.close()

    def _read_stream(self, resp: http.client.HTTPResponse, st: _wire.StreamState,
                     on_tool_call: Optional[Callable[[ToolCall], Any]]) -> Result:
        limit = self.max_line_bytes
        slots = threading.BoundedSemaphore(_wire.MAX_CONCURRENT_TOOL_CALLS)
        while True:
            try:
                line = resp.readline(limit + 1)
            except (OSError, http.client.HTTPException) as e:
                raise ProtocolError("execute: reading the event stream: %s" % (e or type(e).__name__)) from None
            if not line:
                raise ProtocolError("execute: the event stream ended without a result")
            if len(line) > limit and not line.endswith(b"\n"):
                raise ProtocolError("execute: a stream event is over %d bytes" % limit)
            if not line.strip():
                continue
            ev = st.parse(line)
            out = st.output_callback(ev)
            if out is not None:
                out[0](out[1])
                continue
            call = _wire.tool_call_of(ev)
            if call is not None:
                if slots.acquire(blocking=False):
                    threading.Thread(target=self._answer, args=(call, on_tool_call, slots),
                                     name="kernpool-tool-" + call.tool, daemon=True).start()
                else:
                    self._post_answer(call, _wire.TOO_MANY_TOOL_CALLS)
                continue
            res = _wire.final_of(ev)
            if res is not None:
                return res

    def _answer(self, call: ToolCall, handler: Optional[Callable[[ToolCall], Any]],
                slots: threading.BoundedSemaphore) -> None:
        try:
            value: Any = None
            exc: Optional[BaseException] = None
            if handler is not None:
                try:
                    value = handler(call)
                except Exception as e:  # the cell gets it as ToolError
                    exc = e
            self._post_answer(call, _wire.tool_answer(call, handler, value, exc))
        finally:
            slots.release()

    def _post_answer(self, call: ToolCall, body: Dict[str, str]) -> None:
        try:
            self._json("POST", "/v1/tool-calls/" + _wire.seg(call.id), body)  # type: ignore[arg-type]
        except (APIError, ProtocolError, DaemonUnavailable):
            pass  # the call timed out or its cell ended; the daemon answers the cell itself

    def answer_tool_call(self, call_id: str, result: Optional[str] = None, error: Optional[str] = None) -> None:
        """Answer a streamed tool call by hand: exactly one of result and error."""
        if (result is None) == (error is None):
            raise ValueError("answer_tool_call takes exactly one of result and error")
        body = {"result": result} if result is not None else {"error": error}
        self._json("POST", "/v1/tool-calls/" + _wire.seg(call_id), body)  # type: ignore[arg-type]

    def interrupt(self, kernel_id: Optional[str] = None, *, owner: Optional[str] = None,
                  mode: Optional[str] = None, session: Optional[str] = None) -> List[str]:
        """Interrupt the running cell of a kernel, of a session, or of every
        kernel of an owner (of one mode), and return the kernel ids
        interrupted. A kernel or session with no running cell is APIError
        code ``idle``; an owner with none is not an error."""
        if session is not None:
            if kernel_id is not None or owner is not None:
                raise ValueError("interrupt takes exactly one of kernel_id, owner and session")
            out = self._json("POST", "/v1/sessions/%s/interrupt" % _wire.seg(session))
            return _wire.str_list(out, "interrupted", "interrupt")
        out = self._json("POST", _wire.interrupt_path(kernel_id, owner, mode))
        return _wire.str_list(out, "interrupted", "interrupt")

    # -- sessions ------------------------------------------------------------

    def create_session(self, *, owner: Optional[str] = None, mode: Optional[str] = None,
                       tools: Optional[Sequence[str]] = None, env: Optional[Mapping[str, str]] = None,
                       interpreter: Optional[str] = None, cwd: Optional[str] = None) -> Session:
        """Create an explicit session (docs/api.md "Sessions"); run cells in it
        with ``execute(code, session=s.id)``. Its tool set is fixed: a cell
        naming another is APIError code ``session_mismatch``."""
        body = _wire.session_body(owner, mode, interpreter, cwd, tools, env)
        return Session.from_json(self._json("POST", "/v1/sessions", body))

    def sessions(self, owner: Optional[str] = None) -> List[Session]:
        """The sessions this client may see (of ``owner`` only, when given)."""
        out = self._json("GET", _wire.sessions_path(owner))
        if not isinstance(out, dict) or not isinstance(out.get("sessions"), list):
            raise ProtocolError("sessions: expected {\"sessions\": [...]}")
        return [Session.from_json(x) for x in out["sessions"]]

    def session(self, session_id: str) -> Session:
        """One session (APIError code ``not_found`` for none, or another owner's)."""
        return Session.from_json(self._json("GET", "/v1/sessions/" + _wire.seg(session_id)))

    def delete_session(self, session_id: str) -> None:
        """End a session: its kernel is killed and its checkpoints deleted."""
        self._json("DELETE", "/v1/sessions/" + _wire.seg(session_id))

    def restart_session(self, session_id: str) -> str:
        """Kill the session's kernel (its state is lost); the session stays.
        Returns the killed kernel's id ("" when it had none)."""
        out = self._json("POST", "/v1/sessions/%s/restart" % _wire.seg(session_id))
        if not isinstance(out, dict) or not isinstance(out.get("killed"), str):
            raise ProtocolError("restart session: expected {\"killed\": ...}")
        return out["killed"]

    # -- kernels -------------------------------------------------------------

    def ps(self) -> List[KernelInfo]:
        """The live kernels, sorted by owner, then id."""
        out = self._json("GET", "/v1/kernels")
        if not isinstance(out, dict) or not isinstance(out.get("kernels"), list):
            raise ProtocolError("kernels: expected {\"kernels\": [...]}")
        return [KernelInfo.from_json(k) for k in out["kernels"]]

    def shutdown(self, owner: str) -> int:
        """Kill every kernel of owner (running cells end as interrupted); how many."""
        return _wire.int_field(self._json("POST", "/v1/owners/%s/shutdown" % _wire.seg(owner)), "killed", "shutdown")

    def kill(self, kernel_id: str) -> None:
        """Kill one kernel (APIError code ``not_found`` when there is none)."""
        self._json("DELETE", "/v1/kernels/" + _wire.seg(kernel_id))

    def variables(self, kernel_id: Optional[str] = None, *, owner: Optional[str] = None,
                  mode: Optional[str] = None, session: Optional[str] = None) -> Variables:
        """The user-defined names of a kernel, of an owner's kernel in
        ``mode`` (default "default"; the one that ran a cell last, as
        ``kernpool vars --owner`` picks it), or of a session's kernel
        (APIError code ``busy`` while a cell runs, ``interrupted`` when an
        interrupt stopped the listing, ``kernel_died`` when a ``__repr__``
        ended the kernel, ``idle`` for a session without a
        live kernel, ``not_found`` for an owner without one)."""
        _wire.variables_target(kernel_id, owner, session)
        if session is not None:
            return Variables.from_json(self._json("GET", "/v1/sessions/%s/variables" % _wire.seg(session)))
        if owner is not None:
            kernel_id = _wire.kernel_of(self.ps(), owner, mode)
        return Variables.from_json(self._json("GET", "/v1/kernels/%s/variables" % _wire.seg(kernel_id or "")))

    def spill(self, kernel_id: str, name: str, *, max_bytes: int = _wire.DEFAULT_MAX_SPILL_BYTES) -> str:
        """A cell's full (redacted) stdout that was spilled: a result's
        ``kernel.id`` and ``stdout_spill_name``."""
        path = "/v1/kernels/%s/spill/%s" % (_wire.seg(kernel_id), _wire.seg(name))
        conn, resp = self._send("GET", path, None, self.timeout)
        try:
            self._check(resp, "spill")
            return self._read(resp, max_bytes, "spill").decode("utf-8", "replace")
        finally:
            conn.close()

    def health(self) -> Health:
        """The daemon's health report."""
        return Health.from_json(self._json("GET", "/v1/health"))

    def metrics(self) -> str:
        """The Prometheus text exposition of the daemon's metrics (admin on
        the network API)."""
        conn, resp = self._send("GET", "/metrics", None, self.timeout)
        try:
            self._check(resp, "metrics")
            return self._read(resp, self.max_line_bytes, "metrics").decode("utf-8", "replace")
        finally:
            conn.close()

    def settings(self) -> Dict[str, Any]:
        """The running daemon's settings (GET /v1/settings, as the daemon
        sends them; admin on the network API)."""
        return _wire.object_of(self._json("GET", "/v1/settings"), "settings")

    def drain_status(self) -> Dict[str, Any]:
        """The drain's progress, DrainStatus as a dict (GET /v1/drain; admin)."""
        return _wire.object_of(self._json("GET", "/v1/drain"), "drain status")

    def drain(self, on_progress: Optional[Callable[[Dict[str, Any]], Any]] = None) -> Dict[str, Any]:
        """Start a drain (POST /v1/drain; admin; idempotent): the node
        refuses cells, saves its persist kernels and exits. Without
        on_progress it returns the drain's status at once; with it, it
        follows the drain: on_progress gets each change (a DrainStatus
        dict), and it returns the last one the node sent (state
        ``drained`` when it finished; the stream may also end with the
        daemon's exit)."""
        if on_progress is None:
            conn, resp = self._send("POST", "/v1/drain", None, self.timeout)
            try:
                if resp.status != 202:
                    raw = self._read(resp, _wire.MAX_ERROR_BYTES, "drain")
                    raise _wire.api_error(resp.status, raw, resp.getheader("Retry-After"))
                return _wire.json_object(self._read(resp, self.max_line_bytes, "drain"), "drain")
            finally:
                conn.close()
        conn, resp = self._send("POST", _wire.DRAIN_WAIT, None, None)  # no timeout: the grace and the saves
        last: Optional[Dict[str, Any]] = None
        try:
            self._check(resp, "drain")
            while True:
                try:
                    line = resp.readline(self.max_line_bytes + 1)
                except (OSError, http.client.HTTPException) as e:
                    if last is not None and last["state"] == "drained":
                        break  # the daemon exits once drained
                    raise ProtocolError("drain: reading the progress: %s" % (e or type(e).__name__)) from None
                if not line:
                    break
                st = _wire.drain_line(line, self.max_line_bytes, last)
                if st is not last and st is not None:
                    last = st
                    on_progress(st)
        finally:
            conn.close()
        if last is None:
            raise ProtocolError("drain: the progress stream ended without a status")
        return last

    def ready(self) -> str:
        """The node's state from GET /v1/ready: ``"ready"``, else APIError
        (code ``draining`` or ``closed``; needs no credentials)."""
        return _wire.ready_state(self._json("GET", "/v1/ready"))
