"""structlog set-up: key=value lines at a terminal, JSON lines anywhere else (a container)."""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from contextvars import ContextVar
from typing import Any

import structlog

# The request being served (client id, correlation id, API name, principal, the client's
# host:port), set by the
# connection in the request's own context: one ContextVar set per request costs a sixth of
# structlog's bind_contextvars of three fields, and every line logged while serving it carries
# them.
REQUEST: ContextVar[tuple[str | None, int, str, object, str] | None] = ContextVar(
    "shoal_request", default=None
)


def merge_request(
    logger: Any, method: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """structlog processor: the request fields of `REQUEST`, under the keys callers expect."""
    request = REQUEST.get()
    if request is not None:
        event_dict.setdefault("client_id", request[0])
        event_dict.setdefault("correlation_id", request[1])
        event_dict.setdefault("api", request[2])
        event_dict.setdefault("principal", str(request[3]))
        # Where the request came from: on plaintext every principal is User:ANONYMOUS.
        event_dict.setdefault("peer", request[4])
    return event_dict


def configure(
    level: str = "info", json: bool | None = None, stream: Any = None, node_id: int | None = None
) -> None:
    """`node_id`: one of several broker processes (`--processes N`): every line names it."""
    stream = stream or sys.stderr

    def add_node(
        logger: Any, method: str, event_dict: MutableMapping[str, Any]
    ) -> MutableMapping[str, Any]:
        event_dict.setdefault("node_id", node_id)
        return event_dict

    use_json = (not stream.isatty()) if json is None else json
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if use_json
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            merge_request,
            *([add_node] if node_id is not None else []),
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
        logger_factory=structlog.PrintLoggerFactory(stream),
        cache_logger_on_first_use=True,
    )
