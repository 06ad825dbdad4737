"""Explicit sessions, per-call environment values and variables by owner,
with both clients against the real daemon (conftest.py)."""

from __future__ import annotations

import asyncio

import pytest

from conftest import TOKENS, Daemon
from kernpool_client import APIError, AsyncClient, Client

PLANTED = "planted-py-value-0123456789"


def test_sessions(client: Client) -> None:
    s = client.create_session(owner="py-sess", tools=["search"], env={"SESS_VALUE": PLANTED})
    assert s.id.startswith("s") and len(s.id) == 33 and s.owner == "py-sess"
    assert s.tools == ["search"] and s.env_names == ["SESS_VALUE"] and s.kernel_id == ""
    r = client.execute("import os\nsecret = os.environ['SESS_VALUE']\nprint(secret == %r, secret, os.environ['CELL'])" % PLANTED,
                       session=s.id, env={"CELL": "short"})
    # A value of 8 bytes or more is masked; a shorter one is not.
    assert r.status == "success" and r.output == "True *** short\n", r
    r = client.execute("import os\nprint(os.environ.get('CELL'))\nraise ValueError(secret)", session=s.id)
    assert r.stdout == "None\n" and r.exception is not None and r.exception.evalue == "***", r
    assert PLANTED not in r.output + r.error + "".join(r.exception.traceback)
    assert client.session(s.id).kernel_id == r.kernel.id
    assert [k.session for k in client.ps() if k.id == r.kernel.id] == [s.id]
    v = client.variables(session=s.id).by_name()
    assert v["secret"].repr == "'***'"
    # The tool-set rule: another tool set is refused, never a new kernel.
    with pytest.raises(APIError) as e:
        client.execute("secret", session=s.id, tools=["fetch"])
    assert e.value.status == 409 and e.value.code == "session_mismatch" and "tool set" in str(e.value)
    with pytest.raises(APIError) as e:
        client.execute("secret", session=s.id, owner="py-other")
    assert e.value.status == 404 and e.value.code == "not_found"
    with pytest.raises(APIError) as e:
        client.interrupt(session=s.id)
    assert e.value.code == "idle"
    assert [x.id for x in client.sessions(owner="py-sess")] == [s.id]
    assert client.restart_session(s.id) == r.kernel.id
    assert client.execute("print('secret' in globals())", session=s.id).output == "False\n"
    client.delete_session(s.id)
    with pytest.raises(APIError) as e:
        client.session(s.id)
    assert e.value.code == "not_found"


def test_env_bounds(client: Client) -> None:
    ok = client.execute("import os\nprint(len([k for k in os.environ if k.startswith('V_')]))",
                        owner="py-env", env={"V_%02d" % i: "1" for i in range(64)})
    assert ok.output == "64\n", ok
    with pytest.raises(APIError) as e:
        client.execute("1", owner="py-env", env={"V_%02d" % i: "1" for i in range(65)})
    assert e.value.status == 400 and "65 names, the limit is 64" in str(e.value)
    with pytest.raises(APIError) as e:
        client.execute("1", owner="py-env", env={"API_TOKEN": "x"})
    assert e.value.code == "bad_request" and "API_TOKEN" in str(e.value)
    with pytest.raises(TypeError):
        client.execute("1", owner="py-env", env={"A": 1})  # type: ignore[dict-item]


def test_variables_by_owner(client: Client) -> None:
    client.execute("owned = [1, 2]", owner="py-vars")
    v = client.variables(owner="py-vars").by_name()
    assert v["owned"].type == "list" and v["owned"].len == 2
    with pytest.raises(APIError) as e:
        client.variables(owner="py-vars-nobody")
    assert e.value.code == "not_found"
    with pytest.raises(ValueError):
        client.variables("k0", owner="py-vars")


def test_async_sessions(daemon: Daemon) -> None:
    async def main() -> None:
        c = AsyncClient(daemon.socket, timeout=30)
        s = await c.create_session(owner="py-async-sess", env={"GREETING": "hi"})
        r = await c.execute("import os\nx = os.environ['GREETING']\nprint(x)", session=s.id)
        assert r.output == "hi\n", r
        assert (await c.variables(session=s.id)).by_name()["x"].repr == "'hi'"
        with pytest.raises(APIError) as e:  # the session's kernel is not the owner's implicit one
            await c.variables(owner="py-async-sess")
        assert e.value.code == "not_found"
        assert [x.id for x in await c.sessions(owner="py-async-sess")] == [s.id]
        assert (await c.session(s.id)).kernel_id == r.kernel.id
        assert await c.restart_session(s.id) == r.kernel.id
        await c.delete_session(s.id)
        with pytest.raises(APIError):
            await c.session(s.id)
    asyncio.run(main())


def test_network_sessions_bound_to_owner(daemon: Daemon) -> None:
    if daemon.url is None:
        pytest.skip("no network listener: openssl is missing or the daemon did not log its address")
    alice = Client(url=daemon.url, token=TOKENS["py-alice"][0], ca_file=daemon.pki["ca.pem"], timeout=30)
    gw = Client(url=daemon.url, ca_file=daemon.pki["ca.pem"], cert_file=daemon.pki["client.pem"],
                key_file=daemon.pki["client.key"], timeout=30)
    a = alice.create_session(owner="py-net-alice")
    g = gw.create_session(owner="py-net-gw")
    alice.execute("mine = 1", session=a.id)
    gw.execute("theirs = 2", session=g.id)
    for call in (lambda: gw.execute("mine", session=a.id), lambda: gw.session(a.id),
                 lambda: gw.variables(session=a.id), lambda: gw.delete_session(a.id)):
        with pytest.raises(APIError) as e:
            call()
        assert e.value.status == 404 and e.value.code == "not_found"
    assert [s.id for s in alice.sessions()] == [a.id]
    alice.delete_session(a.id)
    gw.delete_session(g.id)
