"""Shoal's own APIs: requests no Kafka client sends, with schemas written the way kio's are.

kio has a schema for every Kafka message, and none for these; they live here, in kio's form
(frozen dataclasses whose fields carry `kafka_type` metadata, under an API key and version),
so kio's readers and writers serialise them and `protocol.messages` finds them beside kio's.
Their keys sit far above Kafka's (Kafka's own run below 100), in Shoal's range, and ApiVersions
does not list them (`is_shoal_api`): a Kafka client never learns of them, and only Shoal's
client (`client/`) sends them.

TxnShareAcknowledge (Shoal's own, after KIP-1289's draft RPC of that name, apache/kafka#22357):
a transactional producer stages share-group acknowledgements in its open transaction; the
transaction's COMMIT applies them, ABORT releases the records (`broker/share/txn_acks.py`).

TxnShareStaged (Shoal's own, between its processes only: `shoal serve --processes N`): a
transaction's coordinator asks a share-partition leader, before it decides a commit, whether
that process still holds what the transaction staged there (`broker/txn_share_remote.py`).
"""

# No `from __future__ import annotations`: kio reads the field types at runtime.
from dataclasses import dataclass
from dataclasses import field
from typing import ClassVar
from typing import Final

from kio.schema.errors import ErrorCode
from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.response_header.v1.header import ResponseHeader
from kio.schema.types import GroupId
from kio.schema.types import ProducerId
from kio.schema.types import TopicName
from kio.schema.types import TransactionalId
from kio.static.constants import EntityType
from kio.static.primitive import i8
from kio.static.primitive import i16
from kio.static.primitive import i32
from kio.static.primitive import i32Timedelta
from kio.static.primitive import i64
from kio.static.protocol import RequestPayload
from kio.static.protocol import ResponsePayload

SHOAL_KEYS_FROM: Final = 30_000  # Shoal's own API keys: never one of Kafka's (int16 range)
TXN_SHARE_ACKNOWLEDGE: Final = 30_000
TXN_SHARE_STAGED: Final = 30_001

_KEY: Final = i16(TXN_SHARE_ACKNOWLEDGE)
_V0: Final = i16(0)


def is_shoal_api(api_key: int) -> bool:
    return api_key >= SHOAL_KEYS_FROM


class _Entity:
    """kio's class variables that every entity of TxnShareAcknowledge v0 shares (kio repeats
    them in each generated class; here each class inherits them, and the top-level request
    and response name their `__type__`)."""

    __slots__ = ()
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = _V0
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = _KEY


class _Request(_Entity):
    __slots__ = ()
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader


class _Response(_Entity):
    __slots__ = ()
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader


# --- TxnShareAcknowledge v0 request ---------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnShareAcknowledgementBatch(_Request):
    first_offset: i64 = field(metadata={"kafka_type": "int64"})
    """First offset of the batch of records acknowledged."""
    last_offset: i64 = field(metadata={"kafka_type": "int64"})
    """Last offset (inclusive) of the batch."""
    acknowledge_types: tuple[i8, ...] = field(metadata={"kafka_type": "int8"}, default=())
    """One type for the batch or one per offset: 0 gap, 1 accept, 2 release, 3 reject
    (as ShareAcknowledge; RENEW is refused: a staged record's lock is the transaction's)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnShareAcknowledgePartition(_Request):
    partition_index: i32 = field(metadata={"kafka_type": "int32"})
    acknowledgement_batches: tuple[TxnShareAcknowledgementBatch, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnShareAcknowledgeTopic(_Request):
    name: TopicName = field(metadata={"kafka_type": "string"})
    partitions: tuple[TxnShareAcknowledgePartition, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnShareAcknowledgeRequest(_Request):
    __type__: ClassVar = EntityType.request
    transactional_id: TransactionalId = field(metadata={"kafka_type": "string"})
    producer_id: ProducerId = field(metadata={"kafka_type": "int64"})
    producer_epoch: i16 = field(metadata={"kafka_type": "int16"})
    group_id: GroupId = field(metadata={"kafka_type": "string"})
    member_id: str = field(metadata={"kafka_type": "string"})
    """The share-group member holding the records (their acquisition passes to the
    transaction)."""
    topics: tuple[TxnShareAcknowledgeTopic, ...]


# --- TxnShareAcknowledge v0 response --------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnShareAcknowledgeResponsePartition(_Response):
    partition_index: i32 = field(metadata={"kafka_type": "int32"})
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnShareAcknowledgeResponseTopic(_Response):
    name: TopicName = field(metadata={"kafka_type": "string"})
    partitions: tuple[TxnShareAcknowledgeResponsePartition, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnShareAcknowledgeResponse(_Response):
    __type__: ClassVar = EntityType.response
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    """Whole-request error (transaction or group refused); NONE: see each partition."""
    topics: tuple[TxnShareAcknowledgeResponseTopic, ...]


# --- TxnShareStaged v0 (between processes) -------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnShareStagedRequest(_Request):
    __type__: ClassVar = EntityType.request
    __api_key__: ClassVar[i16] = i16(TXN_SHARE_STAGED)
    transactional_id: TransactionalId = field(metadata={"kafka_type": "string"})
    producer_id: ProducerId = field(metadata={"kafka_type": "int64"})
    producer_epoch: i16 = field(metadata={"kafka_type": "int16"})


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnShareStagedResponse(_Response):
    __type__: ClassVar = EntityType.response
    __api_key__: ClassVar[i16] = i16(TXN_SHARE_STAGED)
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    """NONE: this process joined the producer's transaction at this epoch and holds what it
    staged; INVALID_TXN_STATE: it does not (it restarted since, or never staged any)."""


REQUESTS: Final[dict[tuple[int, int], type[RequestPayload]]] = {
    (TXN_SHARE_ACKNOWLEDGE, 0): TxnShareAcknowledgeRequest,
    (TXN_SHARE_STAGED, 0): TxnShareStagedRequest,
}
RESPONSES: Final[dict[tuple[int, int], type[ResponsePayload]]] = {
    (TXN_SHARE_ACKNOWLEDGE, 0): TxnShareAcknowledgeResponse,
    (TXN_SHARE_STAGED, 0): TxnShareStagedResponse,
}
