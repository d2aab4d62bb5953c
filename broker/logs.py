"""structlog set-up: key=value lines at a terminal, JSON lines anywhere else (a container)."""

from __future__ import annotations

import logging
import sys
from typing import Any

import structlog


def configure(level: str = "info", json: bool | None = None, stream: Any = None) -> None:
    stream = stream or sys.stderr
    use_json = (not stream.isatty()) if json is None else json
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if use_json
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
        logger_factory=structlog.PrintLoggerFactory(stream),
        cache_logger_on_first_use=True,
    )
