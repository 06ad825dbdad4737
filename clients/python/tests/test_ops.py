"""The operations methods (settings, metrics, ready, drain_status, drain)
of both clients against a real daemon; a drain ends its daemon, so each
drain test has a daemon of its own (conftest.py's own_daemon)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Dict, List

import pytest

from kernpool_client import APIError, AsyncClient, Client, ToolCall

WAIT = 30.0  # seconds a test waits for an event before it fails
GATE_CELL = "import kernpool_tools as t\nprint(t.gate())"


def test_settings_metrics_ready(daemon: Any) -> None:
    c = Client(daemon.socket, timeout=30)
    st = c.settings()
    assert st["socket"] == daemon.socket and st["interpreter"] == "/usr/bin/python3"
    assert st["tool_call_timeout"] == "30s" and st["profiles"]["smallfiles"]["files_max_bytes"] == 64 << 10
    c.execute("1", owner="py-ops")
    assert "kernpool_cells_total" in c.metrics()
    assert c.ready() == "ready"
    assert c.drain_status()["state"] == "ready"

    async def run() -> None:
        a = AsyncClient(daemon.socket, timeout=30)
        assert (await a.settings())["socket"] == daemon.socket
        assert "kernpool_cells_total" in await a.metrics()
        assert await a.ready() == "ready"
        assert (await a.drain_status())["state"] == "ready"
    asyncio.run(run())


def _draining(status: Dict[str, Any]) -> None:
    assert status["state"] == "draining" and status["cells_running"] == 1, status
    assert isinstance(status["started_at"], str)


def test_drain(own_daemon: Any) -> None:
    c = Client(own_daemon.socket, timeout=30)
    called, release = threading.Event(), threading.Event()

    def gate(call: ToolCall) -> str:
        called.set()
        assert release.wait(WAIT)
        return "open"

    out: List[Any] = []
    busy = threading.Thread(target=lambda: out.append(
        c.execute(GATE_CELL, owner="py-drain", tools=["gate"], on_tool_call=gate)))
    busy.start()
    assert called.wait(WAIT)
    _draining(c.drain())
    _draining(c.drain_status())
    with pytest.raises(APIError) as ei:
        c.ready()
    assert ei.value.code == "draining" and ei.value.status == 503
    with pytest.raises(APIError) as ei:
        c.execute("1", owner="py-drain-new")
    assert ei.value.code == "draining"
    # Follow the drain; release the cell once the stream is open (its
    # first line is the status now), else the daemon could exit first.
    seen: List[Dict[str, Any]] = []
    opened = threading.Event()
    last: List[Dict[str, Any]] = []

    def progress(st: Dict[str, Any]) -> None:
        seen.append(st)
        opened.set()
    follow = threading.Thread(target=lambda: last.append(c.drain(progress)))
    follow.start()
    assert opened.wait(WAIT)
    _draining(seen[0])
    release.set()
    busy.join(WAIT)
    follow.join(WAIT)
    assert out and out[0].output == "open\n", out
    assert last and last[0]["state"] == "drained" and last[0]["cells_running"] == 0 and seen[-1] == last[0]


def test_async_drain(own_daemon: Any) -> None:
    async def run() -> None:
        c = AsyncClient(own_daemon.socket, timeout=30)
        called, release, opened = asyncio.Event(), asyncio.Event(), asyncio.Event()

        async def gate(call: ToolCall) -> str:
            called.set()
            await asyncio.wait_for(release.wait(), WAIT)
            return "open"
        busy = asyncio.ensure_future(c.execute(GATE_CELL, owner="py-adrain", tools=["gate"], on_tool_call=gate))
        await asyncio.wait_for(called.wait(), WAIT)
        _draining(await c.drain())
        _draining(await c.drain_status())
        with pytest.raises(APIError) as ei:
            await c.ready()
        assert ei.value.code == "draining"
        seen: List[Dict[str, Any]] = []

        async def progress(st: Dict[str, Any]) -> None:
            seen.append(st)
            opened.set()
        follow = asyncio.ensure_future(c.drain(progress))
        await asyncio.wait_for(opened.wait(), WAIT)
        _draining(seen[0])
        release.set()
        r = await asyncio.wait_for(busy, WAIT)
        assert r.output == "open\n", r
        last = await asyncio.wait_for(follow, WAIT)
        assert last["state"] == "drained" and seen[-1] == last
    asyncio.run(run())
