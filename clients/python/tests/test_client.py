"""The blocking client against a real daemon (conftest.py starts it)."""

from __future__ import annotations

import os
import threading
from typing import Any, List, Tuple

import pytest

from cells import ORDERED_CELL, ORDERED_TOOLS
from kernpool_client import (APIError, Client, DaemonUnavailable, Display, ProtocolError, ToolCall,
                             default_socket)

WAIT = 30.0  # seconds a test waits for an event before it fails


def test_cell(client: Client) -> None:
    r = client.execute("print(6 * 7)", owner="py-cell")
    assert r.status == "success", r
    assert r.ok and r.exit_code == 0 and r.output == "42\n"
    assert r.kernel.id.startswith("k") and r.kernel.execution_count == 1
    assert r.kernel.isolation is not None and r.kernel.isolation.mode in ("sandbox", "process")
    if r.kernel.isolation.mode == "sandbox":  # the init step always runs there
        assert r.kernel.isolation.supervisor in ("reaper", "go"), r.kernel.isolation


def test_failed_cell_is_a_result(client: Client) -> None:
    r = client.execute("1 / 0", owner="py-fail")
    assert r.status == "error" and r.exit_code == 1
    assert "ZeroDivisionError" in r.error


def test_exception_and_streams_apart(client: Client) -> None:
    r = client.execute("import sys\nprint('out')\nprint('err', file=sys.stderr)\nundefined_name", owner="py-exc")
    assert r.stdout == "out\n" and r.stderr == "err\n", r
    e = r.exception
    assert e is not None and e.ename == "NameError" and e.evalue == "name 'undefined_name' is not defined"
    assert e.traceback[0] == "Traceback (most recent call last):\n" and "".join(e.traceback) in r.output
    ok = client.execute("print('fine')", owner="py-exc")
    assert ok.exception is None and ok.stdout == "fine\n" and ok.stderr == ""


def test_state_across_calls(client: Client) -> None:
    first = client.execute("x = 21\nimport math", owner="py-state")
    second = client.execute("print(x * 2, math.floor(2.5))", owner="py-state")
    assert second.output == "42 2\n"
    assert second.kernel.id == first.kernel.id and second.kernel.reused
    assert second.kernel.execution_count == 2 and second.kernel.state_preserved
    # Another owner is another kernel: x is not defined there.
    other = client.execute("x", owner="py-state-other")
    assert other.status == "error" and "NameError" in other.output
    # reset discards the state.
    reset = client.execute("print('x' in globals())", owner="py-state", reset=True)
    assert reset.output == "False\n" and reset.kernel.state_reset


def _barrier(events: List[Tuple[str, Any]], cond: threading.Condition):
    def on_tool_call(call: ToolCall) -> Any:
        if call.tool == "lookup":
            return {"key": call.args["key"]}
        with cond:
            if not cond.wait_for(lambda: len(events) >= call.args["n"], WAIT):
                raise RuntimeError("event %d never arrived (got %r)" % (call.args["n"], events))
        return "ok"
    return on_tool_call


def test_streaming_callbacks_in_order(client: Client) -> None:
    events: List[Tuple[str, Any]] = []
    cond = threading.Condition()

    def rec(kind: str):
        def f(v: Any) -> None:
            with cond:
                events.append((kind, v))
                cond.notify_all()
        return f

    r = client.execute(ORDERED_CELL, owner="py-stream", tools=ORDERED_TOOLS,
                       on_stdout=rec("stdout"), on_stderr=rec("stderr"), on_display=rec("display"),
                       on_tool_call=_barrier(events, cond))
    assert r.status == "success", r
    assert r.tool_calls_made == 4
    assert [k for k, _ in events] == ["stdout", "stderr", "display", "stdout"]
    assert events[0][1] == "one\n" and events[1][1] == "two\n" and events[3][1] == "four {'key': 'k'}\n"
    disp = events[2][1]
    assert isinstance(disp, Display) and disp.data["text/html"] == "<b>three</b>"
    assert len(r.displays) == 1 and r.displays[0].data["text/html"] == "<b>three</b>"


def test_tool_call_answered_by_on_tool_call(client: Client) -> None:
    calls: List[ToolCall] = []

    def on_tool_call(call: ToolCall) -> Any:
        calls.append(call)
        if call.args.get("city") == "Atlantis":
            raise LookupError("no such city: Atlantis")
        return {"temp": 21, "city": call.args["city"]}

    code = ("import kernpool_tools as t\n"
            "w = t.weather(city='Oslo')\n"
            "print(w['temp'], w['city'])\n"
            "try:\n"
            "    t.weather(city='Atlantis')\n"
            "except t.ToolError as e:\n"
            "    print('refused:', e)\n")
    r = client.execute(code, owner="py-tools", tools=["weather"], on_tool_call=on_tool_call)
    assert r.status == "success", r
    assert r.output == "21 Oslo\nrefused: no such city: Atlantis\n"
    assert r.tool_calls_made == 2
    assert [(c.tool, c.args) for c in calls] == [("weather", {"city": "Oslo"}), ("weather", {"city": "Atlantis"})]


def test_tool_call_without_handler_fails_in_the_cell(client: Client) -> None:
    code = ("import kernpool_tools as t\n"
            "try:\n    t.weather(city='x')\nexcept t.ToolError as e:\n    print('refused:', e)\n")
    r = client.execute(code, owner="py-tools-none", tools=["weather"])
    assert r.output.startswith("refused: this client has no on_tool_call handler"), r.output


def test_interrupt(client: Client) -> None:
    owner = "py-intr"
    client.execute("kept = 5", owner=owner)
    started = threading.Event()
    box: List[Any] = []

    def run() -> None:
        try:
            box.append(client.execute("import time\nprint('started')\ntime.sleep(120)", owner=owner,
                                      on_stdout=lambda t: started.set()))
        except BaseException as e:  # reported by the assertion below
            box.append(e)

    th = threading.Thread(target=run)
    th.start()
    assert started.wait(WAIT), "the cell never printed"
    kid = [k.id for k in client.ps() if k.owner == owner]
    assert len(kid) == 1 and client.interrupt(owner=owner) == kid
    th.join(WAIT)
    assert not th.is_alive()
    r = box[0]
    assert not isinstance(r, BaseException), r
    assert r.status == "interrupted" and r.kernel.state_preserved, r
    assert "KeyboardInterrupt" in r.output
    # The kernel kept its state; an interrupt between cells is 409 idle.
    assert client.execute("print(kept)", owner=owner).output == "5\n"
    with pytest.raises(APIError) as ei:
        client.interrupt(kid[0])
    assert ei.value.code == "idle" and ei.value.status == 409


def test_callback_exception_interrupts_the_cell(client: Client) -> None:
    owner = "py-callback"
    client.execute("kept = 1", owner=owner)

    def boom(text: str) -> None:
        raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here"):
        client.execute("print('x')\nimport time\ntime.sleep(120)\nkept = 2", owner=owner, on_stdout=boom)
    # The connection closed, so the daemon interrupted the cell: the next
    # cell runs (it would wait 120 s otherwise) on the same state.
    r = client.execute("print(kept)", owner=owner, timeout=60)
    assert r.output == "1\n" and r.kernel.reused, r


def test_api_errors_carry_their_code(client: Client) -> None:
    with pytest.raises(APIError) as ei:
        client.variables("k0000000000000000")
    assert (ei.value.code, ei.value.status) == ("not_found", 404)
    with pytest.raises(APIError) as ei:
        client.execute("1", mode="no-such-mode")
    assert (ei.value.code, ei.value.status) == ("bad_request", 400)
    assert "no-such-mode" in ei.value.message
    with pytest.raises(APIError) as ei:
        client.execute("1", tools=["not a tool name"])
    assert ei.value.code == "bad_request"
    with pytest.raises(APIError) as ei:
        client.kill("k0000000000000000")
    assert ei.value.code == "not_found"
    with pytest.raises(APIError) as ei:
        client.answer_tool_call("t-no-such-call", result="x")
    assert ei.value.code == "not_found"


def test_kernels_variables_spill_shutdown(client: Client, daemon: Any) -> None:
    owner = "py-admin"
    r = client.execute("xs = [1, 2, 3]\nname = 'kernpool'\nprint('y' * 60000)", owner=owner)
    kid = r.kernel.id
    mine = [k for k in client.ps() if k.owner == owner]
    assert [k.id for k in mine] == [kid] and mine[0].execution_count == 1 and not mine[0].busy
    v = client.variables(kid).by_name()
    assert (v["xs"].type, v["xs"].len, v["xs"].repr) == ("list", 3, "[1, 2, 3]")
    assert (v["name"].type, v["name"].len) == ("str", 8)
    # 60,000 bytes of stdout pass the 50,000-byte inline cap: the rest is spilled.
    assert r.stdout_truncated and r.stdout_spill_name
    assert client.spill(kid, r.stdout_spill_name) == "y" * 60000 + "\n"
    with pytest.raises(APIError) as ei:
        client.spill(kid, "../etc/passwd")
    assert ei.value.code in ("bad_request", "not_found")
    h = client.health()
    assert h.status == "ok" and h.kernels >= 1 and h.pending_tool_calls == 0
    assert client.shutdown(owner) == 1
    assert all(k.owner != owner for k in client.ps())
    k2 = client.execute("1", owner=owner).kernel.id
    client.kill(k2)
    assert all(k.id != k2 for k in client.ps())


def test_oversized_answer_is_a_protocol_error(daemon: Any) -> None:
    # A result line over the client's bound is refused, not buffered.
    small = Client(daemon.socket, max_line_bytes=4096)
    with pytest.raises(ProtocolError, match="over 4096 bytes"):
        small.execute("print('z' * 20000)", owner="py-bound")
    # A JSON answer too: the health report is a few hundred bytes.
    with pytest.raises(ProtocolError, match="over 100 bytes"):
        Client(daemon.socket, max_line_bytes=100).health()


def test_default_socket_follows_the_cli_rules() -> None:
    assert default_socket({"KERNPOOL_SOCKET": "/x/y.sock"}) == "/x/y.sock"
    env = {"XDG_RUNTIME_DIR": "/run/user/1000", "TMPDIR": "/var/tmp"}
    if os.getuid() == 0:
        assert default_socket(env) == "/run/kernpool/kernpool.sock"
    else:
        assert default_socket(env) == "/run/user/1000/kernpool/kernpool.sock"
        assert default_socket({"TMPDIR": "/var/tmp"}) == "/var/tmp/kernpool-%d/kernpool.sock" % os.getuid()
    saved = os.environ.get("KERNPOOL_SOCKET")
    os.environ["KERNPOOL_SOCKET"] = "/from/env.sock"
    try:
        assert Client().socket == "/from/env.sock"
    finally:
        if saved is None:
            del os.environ["KERNPOOL_SOCKET"]
        else:
            os.environ["KERNPOOL_SOCKET"] = saved


def test_no_daemon_is_daemon_unavailable(tmp_path: Any) -> None:
    c = Client(str(tmp_path / "none.sock"))
    with pytest.raises(DaemonUnavailable) as ei:
        c.ps()
    assert "none.sock" in str(ei.value)
