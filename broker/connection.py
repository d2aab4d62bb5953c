"""One client connection: frames in, handlers dispatched, responses out in request order.

The protocol object only moves bytes (framing is sans-IO in `protocol.framing`). Clients
pipeline requests, so each request gets a sequence number and its response waits until every
earlier response has been written. Reading pauses while too many requests are in flight or the
transport's write buffer is full, so a fast producer cannot grow memory without bound.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections import Counter
from collections import deque
from collections.abc import Coroutine
from collections.abc import Iterable
from time import monotonic
from typing import Any

import structlog
from kio.schema.errors import ErrorCode
from kio.static.protocol import RequestPayload
from kio.static.protocol import ResponsePayload

from broker import gc_pause
from broker.acl_cache import AclCache
from broker.connection_quotas import ConnectionSlot
from broker.context import BrokerServices
from broker.context import RequestContext
from broker.context import RequestHandler as Handler
from broker.handler_drive import drive
from broker.handlers.api_versions import unsupported_version_response
from broker.listeners import Listener
from broker.logs import REQUEST
from broker.metrics import ApiStats
from broker.principal import ANONYMOUS
from broker.registry import Answer
from broker.request_order import ORDER
from broker.response_errors import error_codes
from broker.sasl.errors import AuthenticationFailed
from broker.sasl.session import IllegalSaslState
from broker.sasl.session import SaslSession
from broker.sasl.session import SaslState
from broker.tls import peer_principal
from protocol.api_keys import API_VERSIONS
from protocol.api_keys import SASL_AUTHENTICATE
from protocol.api_keys import SASL_HANDSHAKE
from protocol.framing import FrameDecoder
from protocol.framing import FrameError
from protocol.framing import frame
from protocol.messages import HEADER_PREFIX
from protocol.messages import EncodedResponse
from protocol.messages import RequestHeader
from protocol.messages import UndecodableRequest
from protocol.messages import UnknownApi
from protocol.messages import decode_large_request
from protocol.messages import decode_peeked
from protocol.messages import encode_response
from protocol.messages import error_response
from protocol.messages import is_bulky
from protocol.messages import peek_client_id
from protocol.messages import response_frame

log = structlog.get_logger("shoal.connection")

MAX_IN_FLIGHT = 64
# Answers held back to share one write go out once they reach this size: past it a write costs
# more than its system call, and the transport must see them to apply back-pressure.
HOLD_MAX_BYTES = 64 * 1024
# Decoding costs ~35 ms per MiB of acknowledgement ranges: a larger frame is decoded in a
# thread, an array element at a time (`decode_large_request`: kio's reader would keep the GIL
# for a whole array), so it never stalls other clients.
DECODE_ON_LOOP_MAX_BYTES = 256 * 1024
# Error codes of one answer counted on the loop (~1 us each); more are counted in a thread.
COUNT_ON_LOOP_MAX_CODES = 2_000
# What a SASL listener serves before authentication completes; anything else closes the
# connection, as Kafka's SaslServerAuthenticator does.
BEFORE_AUTHENTICATION = frozenset({API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE})


class KafkaConnection(asyncio.Protocol):
    def __init__(
        self,
        services: BrokerServices,
        connections: set[KafkaConnection],
        listener: Listener | None = None,
        slot: ConnectionSlot | None = None,
    ) -> None:
        """`listener`: the one accepted on (None: a plaintext one, as in unit tests); `slot`:
        its place under the connection limits, given back when the connection is lost."""
        # Shared server state.
        self._services = services
        self._stats = services.metrics.request_stats
        self._api_stats: dict[str, ApiStats] = {}  # this connection's lookups in _stats
        self._handlers = services.registry.by_key
        self._connections = connections
        self._listener = listener
        self._listener_name = listener.name if listener is not None else ""
        # Per-connection state.
        self._transport: asyncio.Transport | None = None
        self._principal = ANONYMOUS  # a client certificate's subject, or SASL's user
        self._sasl: SaslSession | None = None
        self._decoder = FrameDecoder(services.config.socket_request_max_bytes)
        self._peer = "?"
        # Authorization decisions for this connection's principal (None: no authorizer).
        self._acl_cache = AclCache() if services.acls is not None else None
        self._next_seq = 0
        self._next_to_write = 0
        # The request still taking effect (-1: none): later ones wait (broker.request_order).
        self._holder = -1
        self._ready: dict[int, bytes | None] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        # Requests whose frame was large (decoded off the loop) and that hold many entries:
        # their answers are encoded off the loop too.
        self._large: set[int] = set()
        # The large request holding the garbage collection pause, by its sequence number: the
        # future its `_decode_off_loop` awaits, set once it is answered (`_complete`).
        self._answered: dict[int, asyncio.Future[None]] = {}
        self._reading_paused = False
        self._writing_paused = False
        self._closing = False
        self._draining = False
        self._waiting: deque[bytes] = deque()  # frames read but not yet dispatched
        self._pumping = False  # _pump is on the stack: a nested call leaves the work to it
        # Responses ready to write, sent as one write: each write is a system call, and these
        # VMs make system calls dear. While a read is being handled (`_holding`), the answers
        # of all its frames wait for the end of it.
        self._out: list[bytes] = []
        self._out_bytes = 0
        self._holding = False
        self._slot = slot
        # connections.max.idle.ms: the last read, or the last sweep that found a request in
        # flight or response bytes leaving (`idle_for`).
        self.last_active = monotonic()
        self._write_backlog = 0  # the transport's write buffer at the last sweep

    # asyncio callbacks -------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # uvloop's is no asyncio.Transport
        peer = transport.get_extra_info("peername")
        self._peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self._connections.add(self)
        if self._listener is not None and self._listener.tls:  # handshake done by now
            principal = peer_principal(transport.get_extra_info("ssl_object"))
            if principal is not None:
                self._principal = principal
                log.info("tls client certificate", peer=self._peer, principal=principal)
        if self._listener is not None and self._listener.sasl:
            config = self._services.config
            self._sasl = SaslSession(config.sasl_mechanisms, self._services.credentials)
            # Until the client logs in, a large frame is no more than a way to use up memory.
            self._decoder.max_frame_bytes = min(
                config.sasl_server_max_receive_size, config.socket_request_max_bytes
            )

    def connection_lost(self, exc: Exception | None) -> None:
        self._connections.discard(self)
        self._closing = True
        if self._slot is not None:
            self._slot.release()
        for task in self._tasks:
            task.cancel()
        self._large.clear()

    def data_received(self, data: bytes) -> None:
        if self._closing:
            return
        self.last_active = monotonic()  # the idle sweep's one cost per read
        try:
            frames = self._decoder.feed(data)
        except FrameError as e:
            self.abort(f"bad frame: {e}")
            return
        self._stats.bytes_in += len(data)
        self._waiting.extend(frames)
        self._holding = True
        try:
            self._pump()
        finally:
            self._holding = False
            self._flush()

    def pause_writing(self) -> None:
        self._writing_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._pump()

    # dispatch ----------------------------------------------------------------------------------

    def _pump(self) -> None:
        """Dispatch waiting frames while there is room: one read may hold hundreds of frames,
        and each may produce a large response, so the in-flight limit gates dispatch too."""
        if self._pumping:  # a handler finished during a dispatch: the loop below goes on
            return
        self._pumping = True
        waiting = self._waiting
        try:
            while waiting and not self._closing:
                if self._holder >= 0 or self._busy():  # a request still taking effect waits
                    break
                self._dispatch(waiting.popleft())
        finally:
            self._pumping = False
        busy = bool(waiting) or self._busy()
        if busy is not self._reading_paused:  # `_update_reading` has something to do
            self._update_reading()

    def _busy(self) -> bool:
        in_flight = self._next_seq - self._next_to_write
        return self._draining or self._writing_paused or in_flight >= MAX_IN_FLIGHT

    def _dispatch(self, payload: bytes) -> None:
        if self._sasl is not None and self._sasl.expects_raw_token:
            seq = self._holder = self._take_seq()
            self._start(self._raw_token(seq, self._sasl, payload))
            return
        if len(payload) < HEADER_PREFIX.size:
            self.abort(f"frame of {len(payload)} bytes is shorter than a header")
            return
        key, version, correlation_id = HEADER_PREFIX.unpack_from(payload)  # peek_header, inline
        sasl = self._sasl
        if sasl is not None and not sasl.authenticated and key not in BEFORE_AUTHENTICATION:
            self.abort(f"api key {key} before SASL authentication completed")
            return
        handler = self._handlers.get(key)
        if handler is None or not handler.min_version <= version <= handler.max_version:
            self._refuse_version(key, version, correlation_id, peek_client_id(payload))
            return
        if len(payload) > DECODE_ON_LOOP_MAX_BYTES:
            # Later requests wait for this one, however long its decoding takes.
            seq = self._holder = self._take_seq()
            self._large.add(seq)
            coro = self._decode_off_loop(seq, handler, payload)
        else:
            try:
                request = decode_peeked(payload, key, version)
            except (UndecodableRequest, UnknownApi) as e:
                self.abort(f"undecodable request: {e}")
                return
            seq = self._next_seq  # _take_seq, inline on the hot path
            self._next_seq = seq + 1
            self._serve(seq, self._context(request.header), handler, request.body)
            return
        self._start(coro)

    def _serve(self, seq: int, ctx: RequestContext, handler: Handler, body: RequestPayload) -> None:
        """Run the handler's first step here, with no task (`broker.handler_drive`). `REQUEST`
        (the log fields) and `ORDER` are set for that step and reset after it; a handler that
        waits goes on in a task, in a copy of the context taken with them still set."""
        header = ctx.header
        started = time.perf_counter()
        self._holder = seq  # until it answers or calls release_order()
        token = REQUEST.set(
            (header.client_id, header.correlation_id, handler.name, ctx.principal, self._peer)
        )
        order = ORDER.set((self, seq))
        try:
            # `Handler.run` without its two calls: `body` was read with the kio class of this
            # key and version, which the handler serves (see `_dispatch`).
            coro = handler.handle(ctx, body)  # type: ignore[arg-type]
            task = drive(coro, self._answer, self._failed, (seq, ctx, handler, started))
        except Exception:  # the answer's own steps failed: a bug of ours
            log.exception("request failed", peer=self._peer)
            self.abort("internal error")
            return
        finally:
            ORDER.reset(order)
            REQUEST.reset(token)
        if task is not None:
            self._track(task)

    def _answer(
        self, seq: int, ctx: RequestContext, handler: Handler, started: float, answer: Answer
    ) -> None:
        """What the handler answered, checked, encoded and queued in request order."""
        if self._holder == seq:
            self._holder = -1
        header = ctx.header
        try:
            response = handler.checked(header.api_version, answer)
            if type(response) is EncodedResponse:  # a hot API's own serialiser's bytes
                out = response_frame(response, header.correlation_id, header.api_version)
                codes: tuple[int, ...] | None = response.error_codes
            else:
                codes = None
                if response is None:
                    out = None
                elif (self._large and seq in self._large) or (
                    handler.bulky_answers and is_bulky(response)
                ):
                    self._start(self._answer_off_loop(seq, ctx, handler, response, started))
                    return
                else:
                    out = response_frame(response, header.correlation_id, header.api_version)
        except Exception:
            self._failed(seq, ctx, handler, started)
            return
        if codes is None:
            self._observe(handler.name, response, started)
        else:  # `_observe`, inline for the answers written by a hot API's own serialiser
            api = handler.name
            stats = self._api_stats.get(api)
            if stats is None:
                stats = self._api_stats[api] = self._stats.of(api)
            stats.observe(time.perf_counter() - started)
            if codes:
                self._count_errors(api, codes)
        self._complete(seq, out)

    def _failed(self, seq: int, ctx: RequestContext, handler: Handler, started: float) -> None:
        """The handler raised (called in its `except` block, for the traceback): the request
        is answered UNKNOWN_SERVER_ERROR."""
        if self._holder == seq:
            self._holder = -1
        log.exception("handler failed", peer=self._peer)
        header = ctx.header
        response = error_response(
            header.api_key, header.api_version, ErrorCode.unknown_server_error
        )
        self._observe(handler.name, response, started)
        self._complete(seq, self._encode(response, ctx))

    def _start(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run a coroutine of the connection's own (a request decoded off the loop, a raw SASL
        token) to its first wait, in a context of its own; it goes on in a task from there.
        Handlers of requests decoded on the loop are run by `_serve`."""
        task = contextvars.copy_context().run(drive, coro, _ignore, self._internal_error, ())
        if task is not None:
            self._track(task)

    def _internal_error(self) -> None:
        """A coroutine of the connection's own raised (in its `except`): a bug of ours."""
        log.exception("request failed", peer=self._peer)
        self.abort("internal error")

    def _track(self, task: asyncio.Task[None]) -> None:
        """A request that waits, in its task: cancelled if the connection is lost."""
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        if not self._pumping:  # else `_pump`'s own check, after this dispatch, does it
            self._update_reading()

    async def _raw_token(self, seq: int, sasl: SaslSession, token: bytes) -> None:
        """A token after a v0 SaslHandshake: answered by a bare frame; a failure closes the
        connection with no answer (v0 has no field for an error), after the same delay."""
        try:
            answer: bytes | None = frame(await sasl.authenticate(token))
        except (AuthenticationFailed, IllegalSaslState) as e:
            log.warning("authentication failed", peer=self._peer, mechanism=sasl.mechanism,
                        reason=str(e))  # fmt: skip
            delay_ms = self._services.config.connection_failed_authentication_delay_ms
            await asyncio.sleep(delay_ms / 1000)
            answer = None
        if sasl.authenticated:
            log.info("authenticated", peer=self._peer, principal=sasl.principal,
                     mechanism=sasl.mechanism)  # fmt: skip
        self._holder = -1
        self._complete(seq, answer)

    def _context(self, header: RequestHeader) -> RequestContext:
        sasl = self._sasl
        principal = sasl.principal if sasl is not None and sasl.principal else self._principal
        # Positional: keywords cost more, once per request.
        # tuple.__new__: a NamedTuple's own __new__ is Python code, a frame per request.
        return tuple.__new__(RequestContext, (self._services, header, self._peer, principal,
                             self._acl_cache, self._listener_name, sasl))  # fmt: skip

    def _refuse_version(
        self, key: int, version: int, correlation_id: int, client_id: str | None
    ) -> None:
        """A version not served, or an unknown key, closes the connection, as Kafka 4 does: its
        network thread checks the header before anything else (`Processor.parseRequestHeader`
        raises UnsupportedVersionException, `processChannelException` closes), so no answer
        comes, in any layout. ApiVersions alone is answered, UNSUPPORTED_VERSION in its v0
        layout with the versions served (KIP-511), for the client to retry with one."""
        log.info("unsupported version", api_key=key, api_version=version, peer=self._peer,
                 client_id=client_id, correlation_id=correlation_id)  # fmt: skip
        if key != API_VERSIONS:
            self.abort(f"unsupported api key {key} version {version}")
            return
        response = unsupported_version_response(self._services.registry)
        seq = self._next_seq
        self._next_seq += 1
        self._complete(seq, frame(encode_response(response, correlation_id, 0)))

    def release_order(self, seq: int) -> None:
        """`seq` has taken effect and now waits on others: the requests after it may start
        (on the next loop turn, not inside the handler's step)."""
        if self._holder == seq:
            self._holder = -1
            if self._waiting:
                asyncio.get_running_loop().call_soon(self._pump)

    def _take_seq(self) -> int:
        seq = self._next_seq
        self._next_seq += 1
        return seq

    async def _decode_off_loop(self, seq: int, handler: Handler, payload: bytes) -> None:
        """A large frame: decoded in a thread; its answer keeps its place in request order.

        Garbage collection is paused (`broker.gc_pause`) from its decoding until it is
        answered (or the pause's bound), and resumed in the `finally` (a lost connection
        cancels this coroutine): a request of a million entries is made, handled and answered
        with no full collection walking its objects."""
        loop = asyncio.get_running_loop()
        paused = gc_pause.hold()
        try:
            try:
                request = await loop.run_in_executor(None, decode_large_request, payload)
            except (UndecodableRequest, UnknownApi) as e:
                self.abort(f"undecodable request: {e}")
                return
            answered = None
            if not is_bulky(request.body):  # a few big record batches: answered on the loop,
                self._large.discard(seq)  # and no call to pause collection for
            elif paused:
                answered = self._answered[seq] = loop.create_future()
            self._serve(seq, self._context(request.header), handler, request.body)
            del request
            if answered is not None and not answered.done():
                await gc_pause.held_until(answered)
        finally:
            self._answered.pop(seq, None)
            if paused:
                gc_pause.release()

    async def _answer_off_loop(
        self, seq: int, ctx: RequestContext, handler: Handler, response: Any, started: float
    ) -> None:
        """`_answer` for a large request or a bulky answer: the answer (a million partitions,
        say) is encoded, and its error codes counted, in a thread, which lets the loop run
        meanwhile (kio's writers are Python code: the thread hands the GIL over at each switch
        interval). Its place in line is kept (`_complete`); the requests after it may start
        meanwhile, as its effect is done."""
        header = ctx.header
        try:
            out, codes = await asyncio.get_running_loop().run_in_executor(
                None, _encoded_with_errors, response, header.correlation_id, header.api_version
            )
        except Exception:
            self._failed(seq, ctx, handler, started)
            return
        del response
        self._stats.of(handler.name).observe(time.perf_counter() - started)
        if codes:
            self._stats.count_error_totals(handler.name, codes)
        self._complete(seq, out)

    @staticmethod
    def _encode(response: ResponsePayload | EncodedResponse, ctx: RequestContext) -> bytes:
        return response_frame(response, ctx.header.correlation_id, ctx.version)

    def _observe(self, api: str, response: Any, started: float) -> None:
        stats = self._api_stats.get(api)  # RequestStats.of, once per API per connection
        if stats is None:
            stats = self._api_stats[api] = self._stats.of(api)
        stats.observe(time.perf_counter() - started)
        # Top-level and partition-level codes, as Kafka counts them; a hot API's own
        # serialiser lists its codes beside the bytes.
        if isinstance(response, EncodedResponse):
            if response.error_codes:
                self._count_errors(api, response.error_codes)
            return
        codes: Iterable[int] = () if response is None else error_codes(response)
        if codes:
            self._stats.count_errors(api, codes)

    def _count_errors(self, api: str, codes: tuple[int, ...]) -> None:
        """A hot API's error codes counted for the request metrics: a long list (a Produce of
        100,000 unknown partitions: ~100 ms of counting) in a thread, whose Python loop hands
        the GIL back, added once done."""
        if len(codes) <= COUNT_ON_LOOP_MAX_CODES:
            self._stats.count_errors(api, codes)
            return
        counted = asyncio.get_running_loop().run_in_executor(None, _counted, codes)
        counted.add_done_callback(lambda done: self._stats.count_error_totals(api, done.result()))

    def _complete(self, seq: int, out: bytes | None) -> None:
        if self._large:
            self._large.discard(seq)
            answered = self._answered.get(seq)
            if answered is not None and not answered.done():
                answered.set_result(None)
        if seq == self._next_to_write:  # next in line (nearly always): no need to hold it
            self._next_to_write += 1
            if out is not None:
                self._out.append(out)
                self._out_bytes += len(out)
        else:
            self._ready[seq] = out
        while self._next_to_write in self._ready:
            data = self._ready.pop(self._next_to_write)
            self._next_to_write += 1
            if data is not None:
                self._out.append(data)
                self._out_bytes += len(data)
        if not self._holding or self._out_bytes >= HOLD_MAX_BYTES:
            self._flush()
        sasl = self._sasl
        if sasl is not None and self._closed_by_sasl(sasl):
            return
        # Else the dispatch loop on the stack goes on by itself. With no frame waiting and
        # reading on, an answer has nothing to start or resume (reading pauses only where
        # `_pump`, `_track` or `pause_writing` see it busy): a long poll answered from its
        # task skips the call (~60 opcodes).
        if not self._pumping and (self._waiting or self._reading_paused):
            self._pump()

    def _closed_by_sasl(self, sasl: SaslSession) -> bool:
        """After an answer on a SASL listener: close on a failed login (once the failure is
        written, as Kafka does), take full-size frames after a successful one."""
        if sasl.state is SaslState.FAILED:
            self._flush()
            self.close()
            return True
        if sasl.authenticated:
            self._decoder.max_frame_bytes = self._services.config.socket_request_max_bytes
        return False

    def _flush(self) -> None:
        """Write the responses that are ready, in one write."""
        out = self._out
        if not out:
            return
        transport = self._transport
        if transport is not None and not self._closing:
            transport.write(out[0] if len(out) == 1 else b"".join(out))
            self._stats.bytes_out += self._out_bytes
        out.clear()
        self._out_bytes = 0

    def _update_reading(self) -> None:
        if self._transport is None or self._closing:
            return
        busy = self._busy() or bool(self._waiting)
        if busy and not self._reading_paused:
            self._transport.pause_reading()
            self._reading_paused = True
        elif not busy and self._reading_paused:
            self._transport.resume_reading()
            self._reading_paused = False

    # lifecycle ---------------------------------------------------------------------------------

    @property
    def idle(self) -> bool:
        return self._next_seq == self._next_to_write

    @property
    def listener_name(self) -> str:
        return self._listener_name

    @property
    def closing(self) -> bool:
        return self._closing

    @property
    def peer(self) -> str:
        return self._peer

    def idle_for(self, now: float) -> float:
        """Seconds without a read, a request in flight or response bytes leaving, at `now`
        (the idle sweep's clock). A request in flight is never idleness, however long it
        waits (a long poll, a group join): that wait is the broker's, not the client's."""
        if self._next_seq != self._next_to_write:
            self.last_active = now
            return 0.0
        transport = self._transport
        backlog = transport.get_write_buffer_size() if transport is not None else 0
        if backlog != self._write_backlog:  # a client reading its answers, however slowly
            self._write_backlog = backlog
            self.last_active = now
        return now - self.last_active

    def expire(self) -> None:
        """Closed by the broker (idle, or over max.connections); the sweep logs it. Answers
        still unsent mean a client not reading them: their bytes are dropped, as Kafka's
        Selector drops a closed channel's sends."""
        transport = self._transport
        if transport is None or self._closing:
            return
        self._closing = True
        if transport.get_write_buffer_size():
            transport.abort()
        else:
            transport.close()

    def abort(self, reason: str) -> None:
        """Close this connection only; other connections are untouched."""
        log.warning("closing connection", peer=self._peer, reason=reason)
        self._closing = True
        if self._transport is not None:
            self._transport.abort()

    def close(self) -> None:
        self._closing = True
        if self._transport is not None:
            self._transport.close()

    def stop_reading(self) -> None:
        """Graceful shutdown: take no new requests, let the in-flight ones finish."""
        self._draining = True
        self._update_reading()


def _ignore(*args: Any) -> None:
    """What a coroutine of the connection's own returns: nothing to answer."""


def _counted(codes: tuple[int, ...]) -> dict[int, int]:
    """Each code's count, in a Python loop: Counter's C loop would keep the GIL throughout."""
    totals: dict[int, int] = {}
    for code in codes:
        totals[code] = totals.get(code, 0) + 1
    return totals


def _encoded_with_errors(
    response: ResponsePayload, correlation_id: int, version: int
) -> tuple[bytes, Counter[int]]:
    """A response's frame and its error codes counted (for `_answer_off_loop`'s thread)."""
    return response_frame(response, correlation_id, version), Counter(error_codes(response))
