"""The files API against a real daemon: uploads a cell reads, files a cell
wrote downloaded byte-identical, listings, deletes, outputs_dir, and each
refusal with its code."""

from __future__ import annotations

import hashlib
import io
import os
import tempfile

import pytest

from kernpool_client import APIError, Client, FileListing


def _owner(name: str) -> str:
    return "py-files-" + name


def test_upload_download_list_delete(client: Client) -> None:
    owner = _owner("rt")
    r = client.execute("1", owner=owner)
    kid = r.kernel.id
    assert client.upload("data/in.csv", b"a,b\n1,2\n", owner=owner) == 8
    r = client.execute("print(open('data/in.csv').read().splitlines())", owner=owner)
    assert r.output == "['a,b', '1,2']\n"
    client.execute("open('out.bin', 'wb').write(bytes(range(256)) * 1000)", owner=owner)
    assert client.download("out.bin", kernel_id=kid) == bytes(range(256)) * 1000
    listing = client.list_files("data", owner=owner)
    assert isinstance(listing, FileListing) and listing.dir == "data" and not listing.truncated
    assert [(e.name, e.size, e.type) for e in listing.entries] == [("in.csv", 8, "file")]
    assert listing.entries[0].mtime.endswith("Z")
    client.delete_file("data/in.csv", kernel_id=kid)
    with pytest.raises(APIError) as ei:
        client.download("data/in.csv", kernel_id=kid)
    assert ei.value.code == "not_found" and ei.value.status == 404


def test_streams_a_large_file_both_ways(client: Client) -> None:
    owner = _owner("big")
    client.execute("1", owner=owner)
    n = 20 << 20
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "src.bin")
        with open(src, "wb") as f:
            for i in range(n >> 20):
                f.write(hashlib.sha256(b"%d" % i).digest() * (1 << 15))
        with open(src, "rb") as f:
            assert client.upload("big.bin", f, owner=owner) == n  # a regular file: Content-Length, streamed
        # A file object of unknown length goes chunked.
        with open(src, "rb") as f:
            assert client.upload("big2.bin", io.BufferedReader(_Unsized(f)), owner=owner) == n
        r = client.execute("import hashlib\nprint(hashlib.sha256(open('big2.bin', 'rb').read()).hexdigest())", owner=owner)
        with open(src, "rb") as f:
            want = hashlib.sha256(f.read()).hexdigest()
        assert r.output.strip() == want
        dst = os.path.join(d, "dst.bin")
        assert client.download("big.bin", dst, owner=owner) == n
        with open(dst, "rb") as f:
            assert hashlib.sha256(f.read()).hexdigest() == want
        buf = io.BytesIO()
        assert client.download("big.bin", buf, owner=owner) == n
        assert hashlib.sha256(buf.getvalue()).hexdigest() == want
        with pytest.raises(Exception):
            client.download("big.bin", owner=owner, max_bytes=1 << 20)


class _Unsized(io.RawIOBase):
    """A readable stream with no fileno and no length."""

    def __init__(self, f: "io.BufferedReader") -> None:
        self.f = f

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:  # type: ignore[no-untyped-def]
        data = self.f.read(len(b))
        b[:len(data)] = data
        return len(data)


def test_outputs_dir(client: Client) -> None:
    owner = _owner("outputs")
    r = client.execute("import os\nos.makedirs('out', exist_ok=True)\nopen('out/a.txt', 'w').write('hi')\nopen('b.txt', 'w').write('x')",
                       owner=owner, outputs_dir="out")
    assert [(o.name, o.size, o.type) for o in r.outputs] == [("out/a.txt", 2, "file")]
    assert not r.outputs_truncated
    assert client.download(r.outputs[0].name, kernel_id=r.kernel.id) == b"hi"


@pytest.mark.parametrize("path,code,words", [
    ("../escape", "bad_request", '".." component'),
    ("a/../../escape", "bad_request", '".." component'),
    ("/etc/passwd", "bad_request", "absolute"),
    ("a\x00b", "bad_request", "NUL"),
    ("n" * 256, "bad_request", "over the limit of 255"),
])
def test_hostile_paths(client: Client, path: str, code: str, words: str) -> None:
    owner = _owner("hostile")
    client.execute("1", owner=owner)
    with pytest.raises(APIError) as ei:
        client.upload(path, b"x", owner=owner)
    assert ei.value.code == code and words in ei.value.message
    with pytest.raises(APIError) as ei:
        client.download(path, owner=owner)
    assert ei.value.code == code


def test_planted_symlink_is_not_followed(client: Client) -> None:
    owner = _owner("symlink")
    client.execute("import os\nos.symlink('/etc/passwd', 'out.txt')\nos.symlink('/etc', 'etc')", owner=owner)
    for path in ("out.txt", "etc/passwd"):
        with pytest.raises(APIError) as ei:
            client.download(path, owner=owner)
        assert ei.value.code in ("not_regular", "not_found"), path
    with pytest.raises(APIError):
        client.upload("etc/kernpool-planted", b"x", owner=owner)
    assert not os.path.exists("/etc/kernpool-planted")


def test_upload_over_files_max_bytes(client: Client) -> None:
    owner = _owner("cap")
    client.execute("1", owner=owner, mode="smallfiles")
    limit = 64 << 10
    assert client.upload("exact.bin", b"x" * limit, owner=owner, mode="smallfiles") == limit
    for data in (b"x" * (limit + 1), io.BufferedReader(_Unsized(io.BytesIO(b"y" * (4 * limit))))):  # type: ignore[arg-type]
        with pytest.raises(APIError) as ei:
            client.upload("big.bin", data, owner=owner, mode="smallfiles")
        assert ei.value.code == "too_large" and ei.value.status == 413 and "65536" in ei.value.message
    names = [e.name for e in client.list_files(owner=owner, mode="smallfiles").entries]
    assert "big.bin" not in names and not [n for n in names if n.startswith(".kernpool-upload-")]


def test_target_is_exactly_one(client: Client) -> None:
    with pytest.raises(ValueError):
        client.list_files()
    with pytest.raises(ValueError):
        client.upload("x", b"", kernel_id="k", owner="o")
    with pytest.raises(ValueError):
        client.upload("x", b"", session="s0", owner="o")
    with pytest.raises(ValueError):
        client.list_files(session="s0", mode="default")


def test_files_by_session(client: Client) -> None:
    s = client.create_session(owner=_owner("sess"), tools=["search"])
    with pytest.raises(APIError) as ei:  # a files call starts no kernel
        client.upload("early.txt", b"x", session=s.id)
    assert ei.value.code == "idle" and ei.value.status == 409
    client.execute("1", session=s.id)
    assert client.upload("in/data.csv", b"a,b\n1,2\n", session=s.id) == 8
    r = client.execute("t = open('in/data.csv').read()\nprint(t.splitlines())\n_ = open('out.txt', 'w').write(t.upper())",
                       session=s.id)
    assert r.output == "['a,b', '1,2']\n", r
    assert client.download("out.txt", session=s.id) == b"A,B\n1,2\n"
    assert [e.name for e in client.list_files("in", session=s.id).entries] == ["data.csv"]
    client.delete_file("in/data.csv", session=s.id)
    with pytest.raises(APIError) as ei:
        client.download("in/data.csv", session=s.id)
    assert ei.value.code == "not_found"
    with pytest.raises(APIError) as ei:
        client.list_files(session="s" + "0" * 32)
    assert ei.value.code == "not_found" and ei.value.status == 404
    client.delete_session(s.id)


def test_async_client_files(daemon) -> None:  # type: ignore[no-untyped-def]
    import asyncio

    from kernpool_client import AsyncClient

    async def main() -> None:
        c = AsyncClient(daemon.socket, timeout=30)
        owner = _owner("async")
        await c.execute("1", owner=owner)
        assert await c.upload("a.txt", b"async bytes", owner=owner) == 11
        assert await c.download("a.txt", owner=owner) == b"async bytes"
        assert [e.name for e in (await c.list_files(owner=owner)).entries if e.name == "a.txt"] == ["a.txt"]
        await c.delete_file("a.txt", owner=owner)
        with pytest.raises(APIError) as ei:
            await c.download("a.txt", owner=owner)
        assert ei.value.code == "not_found"
        s = await c.create_session(owner=_owner("async-sess"))
        await c.execute("1", session=s.id)
        assert await c.upload("b.txt", b"by session", session=s.id) == 10
        assert (await c.execute("print(open('b.txt').read())", session=s.id)).output == "by session\n"
        assert await c.download("b.txt", session=s.id) == b"by session"
        assert "b.txt" in [e.name for e in (await c.list_files(session=s.id)).entries]
        await c.delete_file("b.txt", session=s.id)
        await c.delete_session(s.id)
    asyncio.run(main())
