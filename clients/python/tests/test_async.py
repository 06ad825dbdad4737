"""The asyncio client against a real daemon: two owners at once, each
running the same scenario (a cell, state, ordered streaming, a tool call,
an interrupt, an API error)."""

from __future__ import annotations

import asyncio
from typing import Any, Dict, List, Tuple

import pytest

from cells import ORDERED_CELL, ORDERED_TOOLS
from kernpool_client import APIError, AsyncClient, ProtocolError, ToolCall

WAIT = 30.0

async def scenario(c: AsyncClient, owner: str, log: List[Tuple[str, str]],
                   running: Dict[str, asyncio.Event]) -> Dict[str, Any]:
    # A cell, and its state across calls.
    r = await c.execute("x = %r" % owner, owner=owner)
    assert r.status == "success", r
    r = await c.execute("print(x)", owner=owner)
    assert r.output == owner + "\n" and r.kernel.reused and r.kernel.execution_count == 2
    kid = r.kernel.id
    log.append((owner, "state"))

    # Streaming callbacks in order (coroutine callbacks), and tool calls
    # answered by an async on_tool_call.
    events: List[Tuple[str, Any]] = []
    changed = asyncio.Condition()

    async def rec(kind: str, v: Any) -> None:
        async with changed:
            events.append((kind, v))
            changed.notify_all()

    async def on_tool_call(call: ToolCall) -> Any:
        if call.tool == "lookup":
            return {"owner": owner, "key": call.args["key"]}
        async with changed:
            await asyncio.wait_for(changed.wait_for(lambda: len(events) >= call.args["n"]), WAIT)
        return "ok"

    r = await c.execute(ORDERED_CELL, owner=owner, tools=ORDERED_TOOLS,
                        on_stdout=lambda t: rec("stdout", t), on_stderr=lambda t: rec("stderr", t),
                        on_display=lambda d: rec("display", d.data.get("text/html")), on_tool_call=on_tool_call)
    assert r.status == "success", r
    assert r.tool_calls_made == 4
    assert events == [("stdout", "one\n"), ("stderr", "two\n"), ("display", "<b>three</b>"),
                      ("stdout", "four {'owner': '%s', 'key': 'k'}\n" % owner)]
    log.append((owner, "stream"))

    # An interrupt while the cell runs: the kernel keeps its state.
    started = asyncio.Event()
    cell = asyncio.ensure_future(c.execute("import time\nprint('started')\ntime.sleep(120)", owner=owner,
                                           on_stdout=lambda t: started.set()))
    await asyncio.wait_for(started.wait(), WAIT)
    # Both owners' cells run at once before either is interrupted: a
    # client that served one call at a time would never get here.
    running[owner].set()
    await asyncio.wait_for(asyncio.gather(*(e.wait() for e in running.values())), WAIT)
    assert await c.interrupt(kid) == [kid]
    r = await asyncio.wait_for(cell, WAIT)
    assert r.status == "interrupted" and r.kernel.state_preserved and r.kernel.id == kid
    assert (await c.execute("print(x)", owner=owner)).output == owner + "\n"
    log.append((owner, "interrupt"))

    # An API error with its code.
    with pytest.raises(APIError) as ei:
        await c.interrupt(kid)
    assert (ei.value.code, ei.value.status) == ("idle", 409)
    v = (await c.variables(kid)).by_name()
    assert v["x"].repr == repr(owner)
    return {"kernel": kid}


def test_async_two_owners_concurrently(daemon: Any) -> None:
    async def main() -> Tuple[List[Dict[str, Any]], List[Tuple[str, str]]]:
        c = AsyncClient(daemon.socket, timeout=30)
        log: List[Tuple[str, str]] = []
        running = {o: asyncio.Event() for o in ("py-async-alice", "py-async-bob")}
        outs = await asyncio.gather(*(scenario(c, o, log, running) for o in running))
        # Each owner has two kernels: the tool set is part of a kernel's key.
        kernels: Dict[str, List[str]] = {}
        for k in await c.ps():
            kernels.setdefault(k.owner, []).append(k.id)
        assert outs[0]["kernel"] in kernels["py-async-alice"] and len(kernels["py-async-alice"]) == 2
        assert outs[1]["kernel"] in kernels["py-async-bob"] and len(kernels["py-async-bob"]) == 2
        assert await c.shutdown("py-async-alice") == 2 and await c.shutdown("py-async-bob") == 2
        return outs, log

    outs, log = asyncio.run(main())
    assert outs[0]["kernel"] != outs[1]["kernel"]
    # Both scenarios ran every step; they overlapped by construction (both
    # owners' sleeping cells ran at once, above), not by timing.
    assert sorted(log) == sorted((o, s) for o in ("py-async-alice", "py-async-bob")
                                 for s in ("state", "stream", "interrupt"))


def test_async_errors_and_bounds(daemon: Any, tmp_path: Any) -> None:
    async def main() -> None:
        c = AsyncClient(daemon.socket, timeout=30)
        with pytest.raises(APIError) as ei:
            await c.kill("k0000000000000000")
        assert (ei.value.code, ei.value.status) == ("not_found", 404)
        with pytest.raises(APIError) as ei:
            await c.execute("1", mode="no-such-mode")
        assert (ei.value.code, ei.value.status) == ("bad_request", 400)
        small = AsyncClient(daemon.socket, max_line_bytes=4096)
        with pytest.raises(ProtocolError, match="over 4096 bytes"):
            await small.execute("print('z' * 20000)", owner="py-async-bound")
        with pytest.raises(ProtocolError, match="over 100 bytes"):
            await AsyncClient(daemon.socket, max_line_bytes=100).health()
        # Cancelling execute closes the connection: the daemon interrupts the cell.
        await c.execute("kept = 1", owner="py-async-cancel")
        started = asyncio.Event()
        cell = asyncio.ensure_future(c.execute("print('x')\nimport time\ntime.sleep(120)\nkept = 2",
                                               owner="py-async-cancel", on_stdout=lambda t: started.set()))
        await asyncio.wait_for(started.wait(), WAIT)
        cell.cancel()
        with pytest.raises(asyncio.CancelledError):
            await cell
        r = await c.execute("print(kept)", owner="py-async-cancel", timeout=60)
        assert r.output == "1\n" and r.kernel.reused, r
        await c.shutdown("py-async-cancel")
        h = await c.health()
        assert h.status == "ok"
        r = await c.execute("print('y' * 60000)", owner="py-async-spill")
        assert await c.spill(r.kernel.id, r.stdout_spill_name) == "y" * 60000 + "\n"
        await c.shutdown("py-async-spill")
        await c.shutdown("py-async-bound")

    asyncio.run(main())
