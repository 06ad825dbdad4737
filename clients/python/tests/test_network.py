"""Both clients on the node's network listener over real TLS on loopback
(conftest.py gives the session daemon a listener, a CA, tokens and a
client certificate made with openssl): the same calls as on the socket,
a bearer token or a client certificate, and refusals for other owners."""

from __future__ import annotations

import asyncio

import pytest

from conftest import TOKENS, Daemon
from kernpool_client import APIError, AsyncClient, Client, DaemonUnavailable


@pytest.fixture
def net(daemon: Daemon) -> Daemon:
    if daemon.url is None:
        pytest.skip("no network listener: openssl is missing or the daemon did not log its address")
    return daemon


def test_token_client(net: Daemon) -> None:
    c = Client(url=net.url, token=TOKENS["py-alice"][0], ca_file=net.pki["ca.pem"], timeout=30)
    r = c.execute("x = 41\nprint(x + 1)", owner="py-net-alice")
    assert r.status == "success" and r.output == "42\n", r
    assert c.execute("print(x)", owner="py-net-alice").output == "41\n"
    assert [k.owner for k in c.ps()] == ["py-net-alice"]
    with pytest.raises(APIError) as e:
        c.execute("1", owner="someone-else")
    assert e.value.status == 403 and e.value.code == "forbidden"
    assert c.ready() == "ready"


def test_client_certificate(net: Daemon) -> None:
    c = Client(url=net.url, ca_file=net.pki["ca.pem"], cert_file=net.pki["client.pem"],
               key_file=net.pki["client.key"], timeout=30)
    r = c.execute("print('gw')", owner="py-net-gw")
    assert r.output == "gw\n", r
    with pytest.raises(APIError) as e:
        c.execute("1", owner="py-net-alice")
    assert e.value.code == "forbidden"


def test_refusals(net: Daemon) -> None:
    with pytest.raises(APIError) as e:
        Client(url=net.url, ca_file=net.pki["ca.pem"]).ps()
    assert e.value.status == 401 and e.value.code == "unauthorized"
    with pytest.raises(APIError) as e:
        Client(url=net.url, token="kp_wrong", ca_file=net.pki["ca.pem"]).ps()
    assert e.value.code == "unauthorized"
    # The system's roots do not know the test CA: the handshake fails.
    with pytest.raises(DaemonUnavailable):
        Client(url=net.url, token=TOKENS["py-admin"][0]).health()
    with pytest.raises(ValueError):
        Client(url="http://10.1.2.3:8443", token="t")
    with pytest.raises(ValueError):
        Client(url=net.url, token="bad\r\nX-Injected: 1")


def test_async_client(net: Daemon) -> None:
    async def main() -> None:
        c = AsyncClient(url=net.url, token=TOKENS["py-admin"][0], ca_file=net.pki["ca.pem"], timeout=30)
        r = await c.execute("print('async over tls')", owner="py-net-async")
        assert r.output == "async over tls\n", r
        assert (await c.health()).kernels >= 1
    asyncio.run(main())


def test_files_over_tls_only_for_the_tokens_owners(net: Daemon) -> None:
    alice = Client(url=net.url, token=TOKENS["py-alice"][0], ca_file=net.pki["ca.pem"], timeout=30)
    admin = Client(url=net.url, token=TOKENS["py-admin"][0], ca_file=net.pki["ca.pem"], timeout=30)
    alice.execute("1", owner="py-net-alice")
    assert alice.upload("net.txt", b"over tls", owner="py-net-alice") == 8
    assert alice.download("net.txt", owner="py-net-alice") == b"over tls"
    other = admin.execute("open('secret.txt', 'w').write('s')", owner="py-net-files-other").kernel.id
    # Another owner's kernel: by owner 403, by id 404 (as if it did not exist).
    with pytest.raises(APIError) as e:
        alice.list_files(owner="py-net-files-other")
    assert e.value.status == 403 and e.value.code == "forbidden"
    for call in (lambda: alice.download("secret.txt", kernel_id=other), lambda: alice.upload("x", b"x", kernel_id=other),
                 lambda: alice.list_files(kernel_id=other), lambda: alice.delete_file("secret.txt", kernel_id=other)):
        with pytest.raises(APIError) as e:
            call()
        assert e.value.status == 404 and e.value.code == "not_found"
    assert admin.download("secret.txt", kernel_id=other) == b"s"
