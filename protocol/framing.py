"""Kafka's framing: every request and response is a 4-byte big-endian size and that many bytes.

Sans-IO: `FrameDecoder.feed` takes whatever the transport read and returns the whole frames in
it, so the same code serves the broker, the client and byte-level tests.
"""

from __future__ import annotations

import struct

from protocol.errors import ProtocolException

SIZE = struct.Struct(">i")
DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024  # socket.request.max.bytes


class FrameError(ProtocolException, ValueError):
    """The peer sent something that cannot be a frame: the connection must close."""


class FrameDecoder:
    """Splits a byte stream into frames, refusing any frame larger than `max_frame_bytes`.

    Linear in the bytes fed: an unfinished frame's bytes are appended to one buffer and looked
    at again only once the frame they belong to is complete (its size is known as soon as the
    4-byte prefix is in), so a 100 MiB frame read 64 KiB at a time costs one copy into the
    buffer and one out of it, not one copy of the whole buffer per read.
    """

    __slots__ = ("_buffer", "_max", "_need")

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self._buffer = bytearray()
        self._max = max_frame_bytes
        self._need = SIZE.size  # bytes the buffer must hold before a frame can come out of it

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    @property
    def max_frame_bytes(self) -> int:
        return self._max

    @max_frame_bytes.setter
    def max_frame_bytes(self, value: int) -> None:
        """A new limit for the frames still to come (raised once a client has logged in)."""
        self._max = value

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        """Add bytes read from the peer; return every frame they complete, in order.

        Frames that lie wholly inside `data` are sliced from it directly (one copy); only an
        unfinished tail is buffered.

        :raises FrameError: the next frame's size is negative or above the limit.
        """
        buffer = self._buffer
        if buffer:
            buffer += data
            if len(buffer) < self._need:  # the pending frame (or its size) is not all in
                return []
            # A new buffer for the tail: the old one (up to a whole frame) is freed with the
            # views of it, not kept at its largest size for the life of the connection.
            self._buffer = bytearray()
            view = memoryview(buffer)
            try:
                return self._split(view)
            finally:
                view.release()
        if len(data) >= 4 and type(data) is bytes:
            # One whole frame per read: a client waiting on each answer sends just that.
            (size,) = SIZE.unpack_from(data)
            if size + 4 == len(data) and size <= self._max:
                return [data[4:]]
        return self._split(data)

    def _split(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        """The whole frames at the start of `data`; the rest goes to the (empty) buffer."""
        frames: list[bytes] = []
        pos = 0
        end = len(data)
        need = SIZE.size
        while end - pos >= 4:
            (size,) = SIZE.unpack_from(data, pos)
            if size < 0 or size > self._max:
                raise FrameError(f"frame size {size} outside 0..{self._max}")
            if end - pos - 4 < size:
                need = 4 + size  # size checked: what is buffered never grows past the limit
                break
            frames.append(bytes(data[pos + 4 : pos + 4 + size]))
            pos += 4 + size
        if pos < end:
            self._buffer += data[pos:]
        self._need = need
        return frames


def frame(payload: bytes) -> bytes:
    """Prefix a payload with its size."""
    return SIZE.pack(len(payload)) + payload
