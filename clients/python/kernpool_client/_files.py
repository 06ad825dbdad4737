"""The files API of the blocking Client (docs/api.md "Files"): upload,
download, list and delete files of a kernel's working dir, addressed by
kernel id, by owner (and mode) or by session id. Bodies stream both ways: an upload is
sent from a file object in chunks, a download written to a file object or
path as it arrives; neither is held whole in memory unless asked for."""

from __future__ import annotations

import asyncio
import http.client
import io
import os
import socket as _socket
import stat
from typing import IO, Any, Optional, Union
from urllib.parse import quote

from . import _wire
from .errors import DaemonUnavailable, ProtocolError
from .types import FileListing

CHUNK = 1 << 16
# download() without a destination returns bytes: at most this many.
DEFAULT_MAX_DOWNLOAD_BYTES = 64 << 20

Source = Union[bytes, bytearray, memoryview, str, IO[bytes]]
Dest = Union[str, "os.PathLike[str]", IO[bytes]]


def file_path(path: str) -> str:
    """A file path as one URL segment, "/" and "." escaped: the daemon
    reads it as is and no HTTP layer cleans a ".." out of it."""
    if not isinstance(path, str) or not path:
        raise ValueError("a file path must be a non-empty str")
    return quote(path, safe="").replace(".", "%2E")


def files_base(kernel_id: Optional[str], owner: Optional[str], mode: Optional[str],
               session: Optional[str] = None) -> "tuple[str, str]":
    """The target's path up to /files, and its query (mode of an owner)."""
    if sum(x is not None for x in (kernel_id, owner, session)) != 1:
        raise ValueError("a files call takes exactly one of kernel_id, owner and session")
    if kernel_id is not None:
        return "/v1/kernels/%s/files" % _wire.seg(kernel_id), ""
    if session is not None:
        if mode is not None:
            raise ValueError("a files call by session takes no mode (the session has one)")
        return "/v1/sessions/%s/files" % _wire.seg(session), ""
    query = "mode=" + quote(mode, safe="") if mode else ""
    return "/v1/owners/%s/files" % _wire.seg(owner or ""), query


def files_url(kernel_id: Optional[str], owner: Optional[str], mode: Optional[str], path: str = "",
              dir: Optional[str] = None, session: Optional[str] = None) -> str:
    base, query = files_base(kernel_id, owner, mode, session)
    if path:
        base += "/" + file_path(path)
    if dir:
        query = "&".join(q for q in (query, "dir=" + quote(dir, safe="")) if q)
    return base + ("?" + query if query else "")


def _body(data: Source) -> "tuple[Any, Optional[int]]":
    """The body to send and its length (None: unknown, sent chunked)."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data), len(data)
    if not hasattr(data, "read"):
        raise TypeError("data must be bytes, str or a binary file object")
    try:
        st = os.fstat(data.fileno())
        if stat.S_ISREG(st.st_mode):
            return data, st.st_size - data.tell()
    except (OSError, AttributeError, io.UnsupportedOperation):
        pass

    def chunks() -> Any:
        while True:
            b = data.read(CHUNK)
            if not b:
                return
            if not isinstance(b, (bytes, bytearray)):
                raise TypeError("the file object must be opened in binary mode")
            yield bytes(b)
    return chunks(), None


class FilesMixin:
    """upload, download, list_files and delete_file of Client."""

    def _file_request(self, method: str, path: str, body: Any = None,
                      length: Optional[int] = None) -> "tuple[http.client.HTTPConnection, http.client.HTTPResponse]":
        conn = self._connection()  # type: ignore[attr-defined]
        try:
            conn.connect()
        except OSError as e:
            conn.close()
            raise DaemonUnavailable(self.socket, e) from None  # type: ignore[attr-defined]
        try:
            conn.sock.settimeout(self.timeout)  # type: ignore[attr-defined]
            headers = self._headers()  # type: ignore[attr-defined]
            chunked = False
            if body is not None:
                headers["Content-Type"] = "application/octet-stream"
                if length is None:
                    chunked = True
                else:
                    headers["Content-Length"] = str(length)
            conn.request(method, path, body=body, headers=headers, encode_chunked=chunked)
            return conn, conn.getresponse()
        except _socket.timeout:
            conn.close()
            raise ProtocolError("%s %s: no answer within %ss" % (method, path, self.timeout)) from None  # type: ignore[attr-defined]
        except BrokenPipeError:
            # The daemon refused the body before reading it all (413): its
            # answer is waiting.
            try:
                return conn, conn.getresponse()
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                raise ProtocolError("%s %s: %s" % (method, path, e or type(e).__name__)) from None
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            raise ProtocolError("%s %s: %s" % (method, path, e or type(e).__name__)) from None

    def upload(self, path: str, data: Source, *, kernel_id: Optional[str] = None, owner: Optional[str] = None,
               mode: Optional[str] = None, session: Optional[str] = None) -> int:
        """Write data (bytes, str as UTF-8, or a binary file object, sent in
        chunks) to path of the kernel's working dir, as the kernel's uid;
        return the bytes written. Over the mode's files_max_bytes: APIError
        ``too_large``; a full tmpfs: ``no_space``; nothing is kept of either.
        The kernel is kernel_id's, owner's (of mode) or session's: a
        session with no live kernel yet is APIError ``idle`` (run its first
        cell; a files call never starts a kernel)."""
        body, length = _body(data)
        conn, resp = self._file_request("PUT", files_url(kernel_id, owner, mode, path, session=session), body, length)
        try:
            self._check(resp, "upload")  # type: ignore[attr-defined]
            out = _wire.decode_json(self._read(resp, _wire.MAX_ERROR_BYTES, "upload"), "upload")  # type: ignore[attr-defined]
            return _wire.int_field(out, "bytes", "upload")
        finally:
            conn.close()

    def download(self, path: str, dest: Optional[Dest] = None, *, kernel_id: Optional[str] = None,
                 owner: Optional[str] = None, mode: Optional[str] = None, session: Optional[str] = None,
                 max_bytes: int = DEFAULT_MAX_DOWNLOAD_BYTES) -> Union[bytes, int]:
        """Read path of the kernel's working dir. With dest (a binary file
        object, or a local path written through a temporary file renamed
        when whole) stream into it and return the bytes written; without,
        return the bytes (at most max_bytes: ProtocolError beyond)."""
        conn, resp = self._file_request("GET", files_url(kernel_id, owner, mode, path, session=session))
        try:
            self._check(resp, "download")  # type: ignore[attr-defined]
            want = int(resp.getheader("Content-Length", "-1"))
            if dest is None:
                if want > max_bytes:
                    raise ProtocolError("download: the file is %d bytes, over max_bytes %d" % (want, max_bytes))
                raw = self._read(resp, max_bytes, "download")  # type: ignore[attr-defined]
                _check_length(len(raw), want)
                return raw
            if hasattr(dest, "write"):
                n = _copy(resp, dest)  # type: ignore[arg-type]
                _check_length(n, want)
                return n
            target = os.fspath(dest)  # type: ignore[arg-type]
            tmp = "%s.kernpool-part-%d" % (target, os.getpid())
            try:
                with open(tmp, "wb") as f:
                    n = _copy(resp, f)
                _check_length(n, want)
                os.replace(tmp, target)
            except BaseException:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
                raise
            return n
        finally:
            conn.close()

    def list_files(self, dir: str = "", *, kernel_id: Optional[str] = None, owner: Optional[str] = None,
                   mode: Optional[str] = None, session: Optional[str] = None) -> FileListing:
        """List dir ("" the working dir itself) of the kernel's working dir."""
        url = files_url(kernel_id, owner, mode, dir=dir, session=session)
        return FileListing.from_json(self._json("GET", url))  # type: ignore[attr-defined]

    def delete_file(self, path: str, *, kernel_id: Optional[str] = None, owner: Optional[str] = None,
                    mode: Optional[str] = None, session: Optional[str] = None) -> None:
        """Remove path (a file, a symlink itself, or an empty dir)."""
        conn, resp = self._file_request("DELETE", files_url(kernel_id, owner, mode, path, session=session))
        try:
            if resp.status != 204:
                self._check(resp, "delete_file")  # type: ignore[attr-defined]
                raise ProtocolError("delete_file: HTTP %d" % resp.status)
        finally:
            conn.close()


def _copy(resp: http.client.HTTPResponse, dest: IO[bytes]) -> int:
    n = 0
    while True:
        try:
            b = resp.read(CHUNK)
        except (OSError, http.client.HTTPException) as e:
            raise ProtocolError("download: reading the answer: %s" % (e or type(e).__name__)) from None
        if not b:
            return n
        dest.write(b)
        n += len(b)


def _check_length(n: int, want: int) -> None:
    if want >= 0 and n != want:
        raise ProtocolError("download: %d of %d bytes arrived" % (n, want))


class AsyncFilesMixin:
    """The files methods of AsyncClient: the blocking ones, each run on a
    thread of its own (a blocking socket streams the body; the event loop
    is never blocked), with the AsyncClient's settings."""

    def _blocking(self) -> Any:
        from .client import Client  # client imports this module
        c = object.__new__(Client)
        c.__dict__.update(self.__dict__)  # the same socket or URL, credentials and bounds
        return c

    async def upload(self, path: str, data: Source, **target: Any) -> int:
        """As Client.upload."""
        return await asyncio.to_thread(self._blocking().upload, path, data, **target)

    async def download(self, path: str, dest: Optional[Dest] = None, **kw: Any) -> Union[bytes, int]:
        """As Client.download."""
        return await asyncio.to_thread(self._blocking().download, path, dest, **kw)

    async def list_files(self, dir: str = "", **target: Any) -> FileListing:
        """As Client.list_files."""
        return await asyncio.to_thread(self._blocking().list_files, dir, **target)

    async def delete_file(self, path: str, **target: Any) -> None:
        """As Client.delete_file."""
        await asyncio.to_thread(self._blocking().delete_file, path, **target)
