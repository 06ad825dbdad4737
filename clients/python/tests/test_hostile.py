"""The clients against a hostile daemon: what a real one cannot be made to
send (a kernel has at most 4 tool-RPC connections, so a real daemon never
forwards 70 calls at once). A small HTTP server on a Unix socket plays it."""

from __future__ import annotations

import asyncio
import http.server
import json
import os
import socketserver
import tempfile
import threading
from typing import Any, Dict, Iterator, List

import pytest

from kernpool_client import AsyncClient, Client, ProtocolError, ToolCall
from kernpool_client import _wire

CALLS = _wire.MAX_CONCURRENT_TOOL_CALLS + 6
WAIT = 30.0


class FloodDaemon(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    request_queue_size = 256  # the real daemon listens with the kernel's somaxconn

    def __init__(self, path: str, mode: str) -> None:
        self.mode = mode
        self.answers: Dict[str, Dict[str, str]] = {}
        self.lock = threading.Lock()
        self.refused = threading.Event()   # the 6 calls over the cap were refused
        self.all_answered = threading.Event()
        super().__init__(path, Handler)

    def record(self, call_id: str, body: Dict[str, str]) -> None:
        with self.lock:
            self.answers[call_id] = body
            errors = sum(1 for a in self.answers.values() if "error" in a)
            if errors >= CALLS - _wire.MAX_CONCURRENT_TOOL_CALLS:
                self.refused.set()
            if len(self.answers) == CALLS:
                self.all_answered.set()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: FloodDaemon

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
        if self.path.startswith("/v1/tool-calls/"):
            call_id = self.path.rsplit("/", 1)[1]
            self.server.record(call_id, body)
            self.reply(b'{"answered":"%s"}\n' % call_id.encode())
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if self.server.mode == "flood":
            for i in range(CALLS):
                self.chunk({"event": "tool_call", "call": {"id": "t%d" % i, "tool": "slow", "args": {"i": i}}})
            self.server.all_answered.wait(WAIT)
        else:  # one endless line: the client must stop reading at its bound
            self.chunk_raw(b'{"event":"stdout","text":"' + b"A" * (1 << 20))
            self.chunk_raw(b"A" * (1 << 20))
            self.chunk_raw(b'"}\n')
        self.chunk({"event": "result", "result": {"status": "success", "output": "", "exit_code": 0,
                                                  "duration_seconds": 0, "tool_calls_made": CALLS,
                                                  "kernel": {"id": "k1", "mode": "default"}}})
        try:
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            pass  # the client hung up (as it should, on the endless line)

    def chunk(self, ev: Dict[str, Any]) -> None:
        self.chunk_raw(json.dumps(ev).encode() + b"\n")

    def chunk_raw(self, data: bytes) -> None:
        try:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()
        except OSError:
            pass  # the client hung up (as it should, on the endless line)

    def reply(self, data: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def serve(mode: str) -> Iterator[FloodDaemon]:
    d = tempfile.mkdtemp(prefix="kp-py-fake-")
    srv = FloodDaemon(os.path.join(d, "fake.sock"), mode)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()
        os.unlink(os.path.join(d, "fake.sock"))
        os.rmdir(d)


@pytest.fixture
def flood() -> Iterator[FloodDaemon]:
    yield from serve("flood")


@pytest.fixture
def endless() -> Iterator[FloodDaemon]:
    yield from serve("endless")


def check_flood(srv: FloodDaemon, peak: List[int]) -> None:
    assert peak[0] == _wire.MAX_CONCURRENT_TOOL_CALLS
    assert len(srv.answers) == CALLS
    refused = [a for a in srv.answers.values() if a.get("error", "").endswith("retry later")]
    assert len(refused) == CALLS - _wire.MAX_CONCURRENT_TOOL_CALLS
    assert sum(1 for a in srv.answers.values() if a.get("result") == "ok") == _wire.MAX_CONCURRENT_TOOL_CALLS


def test_sync_client_caps_concurrent_tool_calls(flood: FloodDaemon) -> None:
    lock, running, peak = threading.Lock(), [0], [0]

    def slow(call: ToolCall) -> str:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        assert flood.refused.wait(WAIT), "the calls over the cap were not refused"
        with lock:
            running[0] -= 1
        return "ok"

    r = Client(flood.server_address).execute("", on_tool_call=slow)
    assert r.status == "success"
    check_flood(flood, peak)


def test_async_client_caps_concurrent_tool_calls(flood: FloodDaemon) -> None:
    running, peak = [0], [0]

    async def slow(call: ToolCall) -> str:
        running[0] += 1
        peak[0] = max(peak[0], running[0])
        loop = asyncio.get_running_loop()
        assert await loop.run_in_executor(None, flood.refused.wait, WAIT), "the calls over the cap were not refused"
        running[0] -= 1
        return "ok"

    r = asyncio.run(AsyncClient(flood.server_address).execute("", on_tool_call=slow))
    assert r.status == "success"
    check_flood(flood, peak)


def test_endless_line_is_refused_at_the_bound(endless: FloodDaemon) -> None:
    with pytest.raises(ProtocolError, match="over 65536 bytes"):
        Client(endless.server_address, max_line_bytes=65536).execute("")
    with pytest.raises(ProtocolError, match="over 65536 bytes"):
        asyncio.run(AsyncClient(endless.server_address, max_line_bytes=65536).execute(""))
