"""A second client that times its round trips while a test makes the broker work hard.

Blocking socket in a thread: it measures the broker whether the broker runs in the test's own
event loop or in a process of its own.
"""

from __future__ import annotations

import socket
import threading
import time

from kio.schema.api_versions.v3.request import ApiVersionsRequest

from protocol.framing import SIZE
from protocol.framing import frame
from protocol.messages import encode_request


def read_frame(sock: socket.socket) -> bytes:
    """The next response payload (without its size)."""

    def exact(n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            assert chunk, "the broker closed the connection"
            buf += chunk
        return bytes(buf)

    return exact(SIZE.unpack(exact(4))[0])


class Probe:
    """Another client: ApiVersions round trips in a loop, in a thread, all timed."""

    LIMIT_S = 0.100  # no request may hold the loop for more than ~50 ms

    def __init__(self, port: int, timeout: float = 10) -> None:
        """`timeout`: the longest round trip waited for (the probe fails past it)."""
        self._sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self._stop = threading.Event()
        self.round_trips: list[float] = []
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        body = ApiVersionsRequest(client_software_name="probe", client_software_version="1")
        encoded = frame(encode_request(body, 1, "probe"))
        try:
            while not self._stop.is_set():
                started = time.perf_counter()
                self._sock.sendall(encoded)
                read_frame(self._sock)
                self.round_trips.append(time.perf_counter() - started)
                time.sleep(0.002)
        except (OSError, AssertionError):
            if not self._stop.is_set():
                raise

    def __enter__(self) -> Probe:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        # The last round trip may wait for a loop that this very call blocks (a broker in
        # the test's loop): cut the socket rather than wait for its answer.
        self._stop.set()
        self._sock.shutdown(socket.SHUT_RDWR)
        self._thread.join(10)
        self._sock.close()

    @property
    def slowest(self) -> float:
        assert self.round_trips, "the probe made no round trip"
        return max(self.round_trips)

    def wait_for(self, count: int, timeout: float = 60) -> None:
        """Until `count` round trips are done (polled, with a deadline)."""
        deadline = time.monotonic() + timeout
        while len(self.round_trips) < count:
            assert self._thread.is_alive(), "the probe stopped"
            assert time.monotonic() < deadline, f"{len(self.round_trips)} round trips of {count}"
            time.sleep(0.005)
