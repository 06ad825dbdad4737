"""The asyncio client: HTTP/1.1 over the daemon's Unix socket with asyncio
streams, every line and body bounded."""

from __future__ import annotations

import asyncio
import inspect
import json
from typing import Any, Awaitable, Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple

from . import _wire
from ._files import AsyncFilesMixin
from .errors import APIError, DaemonUnavailable, ProtocolError
from .types import Display, Health, KernelInfo, Result, Session, ToolCall, Variables

__all__ = ["AsyncClient"]

_READ = 64 << 10


class _Response:
    """One HTTP/1.1 answer: status, headers, and a bounded body reader
    (Content-Length, chunked, or up to the end of the connection)."""

    def __init__(self, reader: asyncio.StreamReader, status: int, headers: Dict[str, str]) -> None:
        self.reader = reader
        self.status = status
        self.headers = headers
        self._buf = bytearray()
        self._eof = False
        te = headers.get("transfer-encoding", "").lower()
        self._chunked = "chunked" in te
        self._chunk_left = 0
        self._length: Optional[int] = None
        if not self._chunked and "content-length" in headers:
            cl = headers["content-length"].strip()
            if not cl.isdigit():
                raise ProtocolError("bad Content-Length %r" % cl[:40])
            self._length = int(cl)

    async def _line(self) -> bytes:
        try:
            line = await self.reader.readuntil(b"\n")
        except asyncio.LimitOverrunError:
            raise ProtocolError("an HTTP framing line is too long") from None
        except asyncio.IncompleteReadError:
            raise ProtocolError("the connection closed in the middle of the answer") from None
        if len(line) > _wire.MAX_HEADER_LINE:
            raise ProtocolError("an HTTP framing line is too long")
        return line

    async def _fill(self) -> bool:
        """Append the next piece of the body to the buffer; False at its end."""
        if self._eof:
            return False
        if self._chunked:
            if self._chunk_left == 0:
                size = (await self._line()).split(b";", 1)[0].strip()
                try:
                    n = int(size, 16)
                except ValueError:
                    raise ProtocolError("bad chunk size %r" % size[:40]) from None
                if n == 0:
                    self._eof = True
                    return False
                self._chunk_left = n
            data = await self.reader.read(min(self._chunk_left, _READ))
            if not data:
                raise ProtocolError("the connection closed in the middle of a chunk")
            self._chunk_left -= len(data)
            if self._chunk_left == 0:
                if await self._line() not in (b"\r\n", b"\n"):
                    raise ProtocolError("a chunk does not end with CRLF")
        elif self._length is not None:
            if self._length == 0:
                self._eof = True
                return False
            data = await self.reader.read(min(self._length, _READ))
            if not data:
                raise ProtocolError("the connection closed in the middle of the answer")
            self._length -= len(data)
        else:
            data = await self.reader.read(_READ)
            if not data:
                self._eof = True
                return False
        self._buf += data
        return True

    async def readline(self, limit: int) -> bytes:
        """The next line (with its newline), b"" at the end; ProtocolError
        when a line is over limit bytes."""
        while True:
            i = self._buf.find(b"\n")
            if i >= 0:
                if i + 1 > limit + 1:
                    raise ProtocolError("a stream event is over %d bytes" % limit)
                line = bytes(self._buf[:i + 1])
                del self._buf[:i + 1]
                return line
            if len(self._buf) > limit:
                raise ProtocolError("a stream event is over %d bytes" % limit)
            if not await self._fill():
                line = bytes(self._buf)
                self._buf.clear()
                return line

    async def read(self, limit: int, what: str) -> bytes:
        while await self._fill():
            if len(self._buf) > limit:
                raise ProtocolError("%s: the answer is over %d bytes" % (what, limit))
        if len(self._buf) > limit:
            raise ProtocolError("%s: the answer is over %d bytes" % (what, limit))
        out = bytes(self._buf)
        self._buf.clear()
        return out


class AsyncClient(_wire.Settings, AsyncFilesMixin):
    """The asyncio twin of Client: the same methods, as coroutines.

    Each request uses its own connection, so concurrent calls (cells of
    several owners, an interrupt while a cell runs) need nothing more than
    ``asyncio.gather``. Callbacks may be plain functions or coroutine
    functions; a plain one runs on the event loop, so a tool handler that
    blocks should be a coroutine (e.g. around ``loop.run_in_executor``).
    """

    # -- transport ---------------------------------------------------------

    async def _send(self, method: str, path: str,
                    body: Optional[Dict[str, Any]]) -> Tuple[asyncio.StreamWriter, _Response]:
        net = self.network
        try:
            if net is None:
                opening = asyncio.open_unix_connection(self.socket, limit=_wire.MAX_HEADER_LINE + 2)
            else:
                opening = asyncio.open_connection(net.host, net.port, ssl=net.ssl, limit=_wire.MAX_HEADER_LINE + 2)
            reader, writer = await asyncio.wait_for(opening, self.connect_timeout)
        except (OSError, asyncio.TimeoutError) as e:
            raise DaemonUnavailable(self.socket, e) from None
        try:
            data = b"" if body is None else json.dumps(body).encode("utf-8")
            head = "%s %s HTTP/1.1\r\nConnection: close\r\n" % (method, path)
            for name, value in self._headers().items():
                head += "%s: %s\r\n" % (name, value)
            head += "Accept: application/json, application/x-ndjson\r\nContent-Length: %d\r\n" % len(data)
            if body is not None:
                head += "Content-Type: application/json\r\n"
            writer.write(head.encode("ascii") + b"\r\n" + data)
            await writer.drain()
            return writer, await self._head(reader)
        except OSError as e:
            writer.close()
            raise ProtocolError("%s %s: %s" % (method, path, e)) from None
        except BaseException:
            writer.close()
            raise

    async def _head(self, reader: asyncio.StreamReader) -> _Response:
        probe = _Response(reader, 0, {})
        status_line = (await probe._line()).decode("latin-1").strip()
        parts = status_line.split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
            raise ProtocolError("not an HTTP answer: %r" % status_line[:80])
        headers: Dict[str, str] = {}
        for _ in range(_wire.MAX_HEADERS + 1):
            line = (await probe._line()).decode("latin-1").rstrip("\r\n")
            if not line:
                return _Response(reader, int(parts[1]), headers)
            name, sep, value = line.partition(":")
            if not sep:
                raise ProtocolError("malformed header line %r" % line[:80])
            headers[name.strip().lower()] = value.strip()
        raise ProtocolError("more than %d header lines" % _wire.MAX_HEADERS)

    async def _check(self, resp: _Response, what: str) -> None:
        if resp.status != 200:
            raw = await resp.read(_wire.MAX_ERROR_BYTES, what)
            raise _wire.api_error(resp.status, raw, resp.headers.get("retry-after"))

    async def _json(self, method: str, path: str, body: Optional[Dict[str, Any]] = None) -> Any:
        async def run() -> Any:
            writer, resp = await self._send(method, path, body)
            try:
                await self._check(resp, path)
                return _wire.decode_json(await resp.read(self.max_line_bytes, path), path)
            finally:
                writer.close()
        return await self._timed(method, path, run())

    async def _timed(self, method: str, path: str, answer: Awaitable[Any]) -> Any:
        """answer, awaited within the client's timeout."""
        try:
            return await asyncio.wait_for(answer, self.timeout)
        except asyncio.TimeoutError:
            raise ProtocolError("%s %s: no answer within %ss" % (method, path, self.timeout)) from None

    # -- cells ---------------------------------------------------------------

    async def execute(self, code: str, *, owner: Optional[str] = None, mode: Optional[str] = None,
                      tools: Optional[Sequence[str]] = None, timeout: _wire.Timeout = None, reset: bool = False,
                      on_stdout: Optional[Callable[[str], Any]] = None,
                      on_stderr: Optional[Callable[[str], Any]] = None,
                      on_display: Optional[Callable[[Display], Any]] = None,
                      on_tool_call: Optional[Callable[[ToolCall], Any]] = None,
                      interpreter: Optional[str] = None, cwd: Optional[str] = None,
                      passthrough: Optional[Sequence[str]] = None, limits: Optional[Mapping[str, Any]] = None,
                      max_tool_calls: Optional[int] = None, session: Optional[str] = None,
                      env: Optional[Mapping[str, str]] = None, outputs_dir: Optional[str] = None) -> Result:
        """Run one cell (see Client.execute). Output callbacks run in order
        as events arrive; each tool call runs ``on_tool_call`` in a task of
        its own. Cancelling the coroutine closes the connection, which
        interrupts the cell."""
        body = _wire.execute_body(code, owner, mode, tools, timeout, reset, interpreter, cwd,
                                  passthrough, limits, max_tool_calls, session, env, outputs_dir)
        writer, resp = await self._send("POST", "/v1/execute", body)
        calls: Set["asyncio.Task[None]"] = set()
        try:
            await self._check(resp, "execute")
            if not resp.headers.get("content-type", "").startswith("application/x-ndjson"):
                raw = await resp.read(self.max_line_bytes, "execute")
                return Result.from_json(_wire.decode_json(raw, "execute"))
            st = _wire.StreamState(on_stdout, on_stderr, on_display)
            while True:
                line = await resp.readline(self.max_line_bytes)
                if not line:
                    raise ProtocolError("execute: the event stream ended without a result")
                if not line.strip():
                    continue
                ev = st.parse(line)
                out = st.output_callback(ev)
                if out is not None:
                    r = out[0](out[1])
                    if inspect.isawaitable(r):
                        await r
                    continue
                call = _wire.tool_call_of(ev)
                if call is not None:
                    if len(calls) >= _wire.MAX_CONCURRENT_TOOL_CALLS:
                        await self._post_answer(call, _wire.TOO_MANY_TOOL_CALLS)
                        continue
                    task = asyncio.ensure_future(self._answer(call, on_tool_call))
                    calls.add(task)
                    task.add_done_callback(calls.discard)
                    continue
                res = _wire.final_of(ev)
                if res is not None:
                    return res
        finally:
            writer.close()
            # The cell has settled: the daemon no longer waits for these.
            for t in list(calls):
                t.cancel()
            if calls:
                await asyncio.gather(*calls, return_exceptions=True)

    async def _answer(self, call: ToolCall, handler: Optional[Callable[[ToolCall], Any]]) -> None:
        value: Any = None
        exc: Optional[BaseException] = None
        if handler is not None:
            try:
                value = handler(call)
                if inspect.isawaitable(value):
                    value = await value
            except asyncio.CancelledError:
                raise
            except Exception as e:  # the cell gets it as ToolError
                exc = e
        await self._post_answer(call, _wire.tool_answer(call, handler, value, exc))

    async def _post_answer(self, call: ToolCall, body: Dict[str, str]) -> None:
        try:
            await self._json("POST", "/v1/tool-calls/" + _wire.seg(call.id), body)  # type: ignore[arg-type]
        except (APIError, ProtocolError, DaemonUnavailable):
            pass  # the call timed out or its cell ended; the daemon answers the cell itself

    async def answer_tool_call(self, call_id: str, result: Optional[str] = None,
                               error: Optional[str] = None) -> None:
        """Answer a streamed tool call by hand: exactly one of result and error."""
        if (result is None) == (error is None):
            raise ValueError("answer_tool_call takes exactly one of result and error")
        body = {"result": result} if result is not None else {"error": error}
        await self._json("POST", "/v1/tool-calls/" + _wire.seg(call_id), body)  # type: ignore[arg-type]

    async def interrupt(self, kernel_id: Optional[str] = None, *, owner: Optional[str] = None,
                        mode: Optional[str] = None, session: Optional[str] = None) -> List[str]:
        """See Client.interrupt."""
        if session is not None:
            if kernel_id is not None or owner is not None:
                raise ValueError("interrupt takes exactly one of kernel_id, owner and session")
            out = await self._json("POST", "/v1/sessions/%s/interrupt" % _wire.seg(session))
            return _wire.str_list(out, "interrupted", "interrupt")
        out = await self._json("POST", _wire.interrupt_path(kernel_id, owner, mode))
        return _wire.str_list(out, "interrupted", "interrupt")

    # -- sessions ------------------------------------------------------------

    async def create_session(self, *, owner: Optional[str] = None, mode: Optional[str] = None,
                       tools: Optional[Sequence[str]] = None, env: Optional[Mapping[str, str]] = None,
                       interpreter: Optional[str] = None, cwd: Optional[str] = None) -> Session:
        """Create an explicit session (docs/api.md "Sessions"); run cells in it
        with ``execute(code, session=s.id)``. Its tool set is fixed: a cell
        naming another is APIError code ``session_mismatch``."""
        body = _wire.session_body(owner, mode, interpreter, cwd, tools, env)
        return Session.from_json(await self._json("POST", "/v1/sessions", body))

    async def sessions(self, owner: Optional[str] = None) -> List[Session]:
        """The sessions this client may see (of ``owner`` only, when given)."""
        out = await self._json("GET", _wire.sessions_path(owner))
        if not isinstance(out, dict) or not isinstance(out.get("sessions"), list):
            raise ProtocolError("sessions: expected {\"sessions\": [...]}")
        return [Session.from_json(x) for x in out["sessions"]]

    async def session(self, session_id: str) -> Session:
        """One session (APIError code ``not_found`` for none, or another owner's)."""
        return Session.from_json(await self._json("GET", "/v1/sessions/" + _wire.seg(session_id)))

    async def delete_session(self, session_id: str) -> None:
        """End a session: its kernel is killed and its checkpoints deleted."""
        await self._json("DELETE", "/v1/sessions/" + _wire.seg(session_id))

    async def restart_session(self, session_id: str) -> str:
        """Kill the session's kernel (its state is lost); the session stays.
        Returns the killed kernel's id ("" when it had none)."""
        out = await self._json("POST", "/v1/sessions/%s/restart" % _wire.seg(session_id))
        if not isinstance(out, dict) or not isinstance(out.get("killed"), str):
            raise ProtocolError("restart session: expected {\"killed\": ...}")
        return out["killed"]

    # -- kernels -------------------------------------------------------------

    async def ps(self) -> List[KernelInfo]:
        out = await self._json("GET", "/v1/kernels")
        if not isinstance(out, dict) or not isinstance(out.get("kernels"), list):
            raise ProtocolError("kernels: expected {\"kernels\": [...]}")
        return [KernelInfo.from_json(k) for k in out["kernels"]]

    async def shutdown(self, owner: str) -> int:
        out = await self._json("POST", "/v1/owners/%s/shutdown" % _wire.seg(owner))
        return _wire.int_field(out, "killed", "shutdown")

    async def kill(self, kernel_id: str) -> None:
        await self._json("DELETE", "/v1/kernels/" + _wire.seg(kernel_id))

    async def variables(self, kernel_id: Optional[str] = None, *, owner: Optional[str] = None,
                        mode: Optional[str] = None, session: Optional[str] = None) -> Variables:
        """See Client.variables."""
        _wire.variables_target(kernel_id, owner, session)
        if session is not None:
            return Variables.from_json(await self._json("GET", "/v1/sessions/%s/variables" % _wire.seg(session)))
        if owner is not None:
            kernel_id = _wire.kernel_of(await self.ps(), owner, mode)
        return Variables.from_json(await self._json("GET", "/v1/kernels/%s/variables" % _wire.seg(kernel_id or "")))

    async def spill(self, kernel_id: str, name: str, *, max_bytes: int = _wire.DEFAULT_MAX_SPILL_BYTES) -> str:
        path = "/v1/kernels/%s/spill/%s" % (_wire.seg(kernel_id), _wire.seg(name))
        writer, resp = await self._send("GET", path, None)
        try:
            await self._check(resp, "spill")
            return (await resp.read(max_bytes, "spill")).decode("utf-8", "replace")
        finally:
            writer.close()

    async def health(self) -> Health:
        return Health.from_json(await self._json("GET", "/v1/health"))

    async def ready(self) -> str:
        return _wire.ready_state(await self._json("GET", "/v1/ready"))

    async def metrics(self) -> str:
        async def run() -> str:
            writer, resp = await self._send("GET", "/metrics", None)
            try:
                await self._check(resp, "metrics")
                return (await resp.read(self.max_line_bytes, "metrics")).decode("utf-8", "replace")
            finally:
                writer.close()
        return await self._timed("GET", "/metrics", run())

    async def settings(self) -> Dict[str, Any]:
        return _wire.object_of(await self._json("GET", "/v1/settings"), "settings")

    async def drain_status(self) -> Dict[str, Any]:
        return _wire.object_of(await self._json("GET", "/v1/drain"), "drain status")

    async def drain(self, on_progress: Optional[Callable[[Dict[str, Any]], Any]] = None) -> Dict[str, Any]:
        """As Client.drain; on_progress may be a coroutine function."""
        if on_progress is None:
            async def start() -> Dict[str, Any]:
                writer, resp = await self._send("POST", "/v1/drain", None)
                try:
                    if resp.status != 202:
                        raw = await resp.read(_wire.MAX_ERROR_BYTES, "drain")
                        raise _wire.api_error(resp.status, raw, resp.headers.get("retry-after"))
                    return _wire.json_object(await resp.read(self.max_line_bytes, "drain"), "drain")
                finally:
                    writer.close()
            return await self._timed("POST", "/v1/drain", start())
        writer, resp = await self._send("POST", _wire.DRAIN_WAIT, None)  # no timeout: the grace and the saves
        last: Optional[Dict[str, Any]] = None
        try:
            await self._check(resp, "drain")
            while True:
                try:
                    line = await resp.readline(self.max_line_bytes)
                except (OSError, ProtocolError):
                    if last is not None and last["state"] == "drained":
                        break  # the daemon exits once drained
                    raise
                if not line:
                    break
                st = _wire.drain_line(line, self.max_line_bytes, last)
                if st is not last and st is not None:
                    last = st
                    if inspect.isawaitable(got := on_progress(st)):
                        await got
        finally:
            writer.close()
        if last is None:
            raise ProtocolError("drain: the progress stream ended without a status")
        return last
