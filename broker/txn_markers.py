"""A transaction's markers in partitions led by other processes (`--processes N`).

The coordinator (`coordinator/transaction_coordinator.py`) writes its markers through a
synchronous `write_markers`: local partitions are appended at once; for a partition another
process leads, this channel sends WriteTxnMarkers to that leader (over the kept connection of
`broker/node_link.py`) and reports the partition not written until the leader has answered, so
the transaction stays prepared. A delivery is retried until it is written, with a backoff, as
Kafka's `TransactionMarkerChannelManager` retries; once written, the next `write_markers` call
for that partition finds it delivered and the transaction completes. Whoever waits on the
completion (EndTxn, the timer) awaits `delivered`; a delivery that succeeds with nobody waiting
calls `on_written`, which finishes the prepared transactions.

A leader's answer, as Kafka's `TransactionMarkerRequestCompletionHandler` takes it: NONE is
written; INVALID_PRODUCER_EPOCH means a later epoch's marker ended the transaction there
already (a fencing abort), so nothing is left to write; UNKNOWN_TOPIC_OR_PARTITION for a topic
this process no longer knows is a deleted topic (nothing to end); anything else (the leader
restarting, a full disk) is retried.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from collections.abc import Iterable

import structlog
from kio.schema.errors import ErrorCode
from kio.schema.types import ProducerId
from kio.schema.types import TopicName
from kio.schema.write_txn_markers import v1
from kio.static.primitive import i16
from kio.static.primitive import i32

from broker.node_link import NodeLinks
from protocol.transaction_log import TopicPartition

log = structlog.get_logger("shoal.transactions")

BACKOFF_FIRST_S = 0.1
BACKOFF_MAX_S = 5.0
# A marker's key: the transaction's producer id, epoch and outcome, and the partition.
Key = tuple[int, int, bool, TopicPartition]


class MarkerChannel:
    def __init__(
        self, links: NodeLinks, topic_known: Callable[[str], bool],
        on_written: Callable[[], None] | None = None,
    ) -> None:  # fmt: skip
        self._links = links
        self._topic_known = topic_known
        self.on_written = on_written
        self._sending: set[Key] = set()
        self._written: set[Key] = set()
        self._changed = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()

    def write(
        self, node: int, partitions: Iterable[TopicPartition], pid: int, epoch: int, commit: bool
    ) -> set[TopicPartition]:
        """The partitions whose marker `node` has not written yet; their delivery is started
        (when not under way). A delivered one counts once: the coordinator asks again only of
        those it still lacks."""
        missing: set[TopicPartition] = set()
        new: list[TopicPartition] = []
        for tp in partitions:
            key = (pid, epoch, commit, tp)
            if key in self._written:
                self._written.discard(key)
                continue
            missing.add(tp)
            if key not in self._sending:
                new.append(tp)
        if new:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # a start before the loop runs: the timer's pass sends them
                return missing
            self._sending.update((pid, epoch, commit, tp) for tp in new)
            task = loop.create_task(self._deliver(node, new, pid, epoch, commit))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return missing

    def sending(self, pid: int, epoch: int, commit: bool) -> bool:
        return any(k[:3] == (pid, epoch, commit) for k in self._sending)

    async def delivered(self, pid: int, epoch: int, commit: bool, timeout_s: float) -> bool:
        """Wait until none of this transaction's markers is on its way; False if some still
        are after `timeout_s` (a leader down: the deliveries go on, the caller need not)."""

        async def quiet() -> None:
            while self.sending(pid, epoch, commit):
                await self._changed.wait()

        try:  # wait_for, not asyncio.timeout: EndTxn's first step runs in no task
            await asyncio.wait_for(quiet(), timeout_s)
        except TimeoutError:
            return False
        return True

    async def _deliver(
        self, node: int, partitions: list[TopicPartition], pid: int, epoch: int, commit: bool
    ) -> None:
        todo = list(partitions)
        backoff = BACKOFF_FIRST_S
        while todo:
            todo = await self._send(node, todo, pid, epoch, commit)
            if todo:
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX_S)
        if self.on_written is not None:
            self.on_written()

    async def _send(
        self, node: int, partitions: list[TopicPartition], pid: int, epoch: int, commit: bool
    ) -> list[TopicPartition]:
        """One WriteTxnMarkers to `node`; the partitions to send again."""
        by_topic: dict[str, list[int]] = {}
        for topic, p in partitions:
            by_topic.setdefault(topic, []).append(p)
        request = v1.WriteTxnMarkersRequest(
            markers=(
                v1.request.WritableTxnMarker(
                    producer_id=ProducerId(pid), producer_epoch=i16(epoch),
                    transaction_result=commit, coordinator_epoch=i32(0),
                    topics=tuple(
                        v1.request.WritableTxnMarkerTopic(
                            name=TopicName(t), partition_indexes=tuple(i32(p) for p in ps)
                        )
                        for t, ps in by_topic.items()
                    ),
                ),
            )
        )  # fmt: skip
        try:
            answer = await self._links.request(node, request)
        except (OSError, TimeoutError) as e:
            log.warning("transaction markers not delivered; retried", node=node,
                        producer_id=pid, partitions=len(partitions), error=str(e))  # fmt: skip
            return partitions
        again: list[TopicPartition] = []
        codes: dict[TopicPartition, int] = {
            (str(t.name), int(r.partition_index)): r.error_code
            for m in answer.markers for t in m.topics for r in t.partitions
        }  # fmt: skip
        for tp in partitions:
            code = codes.get(tp, ErrorCode.unknown_server_error)
            done = code in (ErrorCode.none, ErrorCode.invalid_producer_epoch) or (
                code == ErrorCode.unknown_topic_or_partition and not self._topic_known(tp[0])
            )
            if done:
                self._sending.discard((pid, epoch, commit, tp))
                self._written.add((pid, epoch, commit, tp))
            else:
                again.append(tp)
        if again:
            code = ErrorCode(codes.get(again[0], ErrorCode.unknown_server_error))
            log.warning("transaction markers refused by their leader; retried", node=node,
                        producer_id=pid, partitions=len(again), error=code.name)  # fmt: skip
        self._changed.set()
        self._changed = asyncio.Event()
        return again

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
