"""One log line when a retried disk write starts failing, one when it succeeds again.

A duty that retries every second (share snapshot files) or a call that fails on every request
(a producer id block) on a full disk must not log each attempt: an episode is said once, at its
start, and its end is said once too (as the log's own `log write failed` / `log writes resumed`).
"""

from __future__ import annotations

from typing import Any


class FailureEpisode:
    def __init__(self, logger: Any, failed: str, resumed: str) -> None:
        self._log = logger
        self._failed = failed
        self._resumed = resumed
        self.failing = False

    def failed(self, error: OSError, **fields: Any) -> None:
        if not self.failing:
            self.failing = True
            self._log.warning(self._failed, error=error.strerror or str(error), **fields)

    def succeeded(self, **fields: Any) -> None:
        if self.failing:
            self.failing = False
            self._log.info(self._resumed, **fields)
