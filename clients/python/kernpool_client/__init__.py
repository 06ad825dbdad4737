"""Python client of the kernpool daemon (docs/api.md, docs/openapi.json).

Standard library only. ``Client`` blocks; ``AsyncClient`` is its asyncio
twin::

    from kernpool_client import Client

    c = Client()                      # $KERNPOOL_SOCKET or the CLI's default socket
    c.execute("x = 21", owner="alice")
    r = c.execute("print(x * 2)", owner="alice", on_stdout=print)
    assert r.status == "success" and r.output == "42\\n"
"""

from .aio import AsyncClient
from .client import Client
from ._wire import default_socket
from .errors import APIError, DaemonUnavailable, KernpoolError, ProtocolError
from .types import (Display, ExceptionInfo, Health, Isolation, KernelInfo, KernelResult, Result, Session,
                    ToolCall, Variable, Variables)

__version__ = "0.1.0"

__all__ = [
    "Client",
    "AsyncClient",
    "default_socket",
    "KernpoolError",
    "APIError",
    "DaemonUnavailable",
    "ProtocolError",
    "Result",
    "ExceptionInfo",
    "KernelResult",
    "Isolation",
    "Display",
    "ToolCall",
    "KernelInfo",
    "Variable",
    "Variables",
    "Health",
    "Session",
]
