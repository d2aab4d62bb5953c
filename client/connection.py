"""One connection to a broker: pipelined requests, responses matched by correlation id.

Kafka answers in request order on a connection, so a FIFO of pending futures is enough; the
correlation id is still checked to catch a confused peer.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import ssl
from collections import deque
from typing import Any
from typing import TypeVar

from kio.schema.errors import ErrorCode
from kio.schema.sasl_authenticate import v1 as sasl_authenticate
from kio.schema.sasl_handshake import v1 as sasl_handshake
from kio.static.protocol import RequestPayload

from client.security import AuthenticationError
from client.security import Security
from client.security import TlsHandshakeError
from protocol.framing import SIZE
from protocol.framing import frame
from protocol.messages import decode_response
from protocol.messages import encode_request
from protocol.messages import is_bulky
from protocol.wire import INT32

R = TypeVar("R")
# A response larger than this is decoded in a thread, an array element at a time (kio's reader
# keeps the GIL for a whole array: DeleteAcls matching 40,000 bindings, 0.75 MB, took 60 ms),
# and a request of more than `protocol.messages.BULKY_ENTRIES` entries is encoded in one: a
# process of `--processes N` forwards a client's request of a million entries to node 0 over
# one of these connections, and neither may hold its event loop meanwhile.
DECODE_ON_LOOP_MAX_BYTES = 128 * 1024
CORRELATION_AT = 4  # a request header's correlation id follows its api key and version


class ConnectionClosed(ConnectionError):
    """The broker closed the connection, or it was closed here."""


def _server_name(
    host: str, context: ssl.SSLContext | None, security: Security | None
) -> str | None:
    """The name the broker's certificate is checked against: `host` unless set otherwise."""
    if context is None:
        return None
    return (security.server_hostname if security else None) or host


class Connection:
    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client_id: str
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._client_id = client_id
        self._next_correlation = 0
        self._pending: deque[tuple[int, int, int, asyncio.Future[Any]]] = deque()
        self._read_task = asyncio.get_running_loop().create_task(self._read_loop())
        self._closed = False

    @classmethod
    async def open(
        cls,
        host: str,
        port: int,
        client_id: str = "shoal-client",
        security: Security | None = None,
    ) -> Connection:
        """:raises AuthenticationError: SASL credentials refused (the connection is closed)."""
        context = security.ssl_context() if security else None
        try:
            reader, writer = await asyncio.open_connection(
                host, port, ssl=context, server_hostname=_server_name(host, context, security)
            )
        except (ssl.SSLError, ConnectionResetError, asyncio.IncompleteReadError) as e:
            if context is None or security is None:
                raise
            if isinstance(e, ssl.SSLCertVerificationError):
                raise TlsHandshakeError(
                    f"TLS handshake with {host}:{port} failed: the broker's certificate is "
                    f"refused ({e.verify_message})"
                ) from e
            # A plaintext listener answers a ClientHello with garbage or a reset: say so.
            raise TlsHandshakeError(
                f"TLS handshake with {host}:{port} failed ({type(e).__name__}: {e}): "
                f"security.protocol={security.protocol} needs a listener that speaks TLS; is "
                f"{host}:{port} a PLAINTEXT or SASL_PLAINTEXT listener?"
            ) from e
        conn = cls(reader, writer, client_id)
        if security is not None and security.sasl:
            try:
                await conn._authenticate(security)
            except BaseException:
                await conn.close()
                raise
        return conn

    async def _authenticate(self, security: Security) -> None:
        """SaslHandshake v1, then SaslAuthenticate until the mechanism is done."""
        shake = await self.request(
            sasl_handshake.SaslHandshakeRequest(mechanism=security.mechanism)
        )
        if shake.error_code != ErrorCode.none:
            if not shake.mechanisms:  # a listener without SASL answers so
                raise AuthenticationError(
                    f"SASL {security.mechanism} refused ({ErrorCode(shake.error_code).name}): "
                    "the broker offers no SASL mechanism on this listener; "
                    f"security.protocol={security.protocol} needs a SASL listener (is this one "
                    "PLAINTEXT or SSL?)"
                )
            raise AuthenticationError(
                f"SASL {security.mechanism} refused: the broker offers "
                f"{', '.join(shake.mechanisms)} on this listener (set sasl.mechanism to one)"
            )
        client, challenge = security.sasl_client(), b""
        while not client.done:
            token = client.step(challenge)
            if client.done and not token:
                break
            answer = await self.request(sasl_authenticate.SaslAuthenticateRequest(auth_bytes=token))
            if answer.error_code != ErrorCode.none:
                raise AuthenticationError(answer.error_message or "authentication failed")
            challenge = answer.auth_bytes

    async def request(self, body: RequestPayload, *, expect_response: bool = True) -> Any:
        """Send a request and wait for its response (None when the broker sends none)."""
        if self._closed:
            raise ConnectionClosed("connection is closed")
        if is_bulky(body):
            # Encoded in a thread (kio's writers are Python code: it hands the GIL over), its
            # correlation id written in once it is its turn to go out: requests sent meanwhile
            # keep theirs in the order they are written, which is the order answers come in.
            encoded = bytearray(
                await asyncio.get_running_loop().run_in_executor(
                    None, encode_request, body, 0, self._client_id
                )
            )
            if self._closed:
                raise ConnectionClosed("connection is closed")
            correlation = self._next_correlation
            encoded[CORRELATION_AT : CORRELATION_AT + 4] = INT32.pack(correlation)
            payload = bytes(encoded)
        else:
            correlation = self._next_correlation
            payload = encode_request(body, correlation, self._client_id)
        self._next_correlation += 1
        self._writer.write(frame(payload))
        if not expect_response:
            await self._writer.drain()
            return None
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending.append((correlation, body.__api_key__, body.__version__, fut))
        await self._writer.drain()
        return await fut

    async def _read_loop(self) -> None:
        error: BaseException = ConnectionClosed("broker closed the connection")
        try:
            while True:
                size_bytes = await self._reader.readexactly(4)
                (size,) = SIZE.unpack(size_bytes)
                payload = await self._reader.readexactly(size)
                if not self._pending:
                    raise ConnectionClosed("response with no request pending")
                correlation, key, version, fut = self._pending.popleft()
                if size > DECODE_ON_LOOP_MAX_BYTES:
                    got, body = await asyncio.get_running_loop().run_in_executor(
                        None, functools.partial(decode_response, key, version, payload, large=True)
                    )
                else:
                    got, body = decode_response(key, version, payload)
                if got != correlation:
                    raise ConnectionClosed(f"correlation id {got}, expected {correlation}")
                if not fut.done():
                    fut.set_result(body)
        except (asyncio.IncompleteReadError, ConnectionError, OSError) as e:
            error = (
                e
                if isinstance(e, ConnectionClosed)
                else ConnectionClosed(str(e) or type(e).__name__)
            )
        except asyncio.CancelledError:
            error = ConnectionClosed("connection closed")
        finally:
            self._closed = True
            while self._pending:
                fut = self._pending.popleft()[3]
                if not fut.done():
                    fut.set_exception(error)

    @property
    def closed(self) -> bool:
        return self._closed

    async def close(self) -> None:
        self._closed = True
        self._read_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._read_task
        self._writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await self._writer.wait_closed()
