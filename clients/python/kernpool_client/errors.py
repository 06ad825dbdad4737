"""Exceptions of the kernpool client.

A cell that fails (an exception, a timeout, a killed kernel) is not an
exception here: it is a Result whose status says so. These are raised when
the daemon refuses or cannot serve a request, or cannot be reached.
"""

from __future__ import annotations

from typing import Optional

__all__ = [
    "KernpoolError",
    "APIError",
    "DaemonUnavailable",
    "ProtocolError",
]


class KernpoolError(Exception):
    """Base class of every error this package raises."""


class APIError(KernpoolError):
    """An error answer of the daemon: ``{"error": message, "code": code}``.

    ``code`` is the API's error code (docs/api.md "Conventions"):
    ``bad_request``, ``not_found``, ``method_not_allowed``,
    ``request_timeout``, ``conflict``, ``session_mismatch``, ``idle``,
    ``busy``, ``too_large``,
    ``quota``, ``capacity``, ``closed``, ``too_many_connections``,
    ``timeout`` (a variables listing interrupted after 10 s),
    ``interrupted`` (a variables listing stopped by an interrupt; the
    kernel keeps its state unless the message says it was killed),
    ``kernel_died`` (a ``__repr__`` ended the kernel during a variables
    listing: ``os._exit``, or the OOM killer, which the message names; its
    state is lost and the owner's next cell gets a new kernel),
    ``spawn_failed`` or ``internal``. ``status`` is the HTTP status, or None
    for an ``error`` event that ended a stream (and for ``variables(owner=...)``
    finding no live kernel of the owner). ``retry_after`` is the
    daemon's Retry-After hint in seconds (capacity, quota), else None.
    """

    def __init__(self, code: str, message: str, status: Optional[int] = None,
                 retry_after: Optional[int] = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status
        self.retry_after = retry_after

    def __str__(self) -> str:
        where = "HTTP %d, " % self.status if self.status else ""
        return "%s (%s%s)" % (self.message, where, self.code)

    def __repr__(self) -> str:
        return "APIError(code=%r, message=%r, status=%r, retry_after=%r)" % (
            self.code, self.message, self.status, self.retry_after)


class DaemonUnavailable(KernpoolError):
    """No daemon answers on the socket (missing socket, refused, no permission)."""

    def __init__(self, socket_path: str, cause: BaseException) -> None:
        super().__init__("kernpool daemon not reachable on %s: %s" % (socket_path, cause))
        self.socket_path = socket_path
        self.cause = cause


class ProtocolError(KernpoolError):
    """The daemon's answer could not be understood (malformed, oversized or cut short)."""
