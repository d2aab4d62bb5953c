"""A share group's metadata record of the internal `__consumer_offsets` log, in Kafka's schema.

Kafka's group coordinator writes one per share group it coordinates (`ShareGroupMetadataKey`
and `ShareGroupMetadataValue`, `group-coordinator/src/main/resources/common/message/`) and
replays them at start (`GroupCoordinatorShard.replay` -> `GroupMetadataManager.replay`), so
a restarted coordinator knows every share group; a tombstone (null value) deletes the group.

- key, version 11 (the record's type): group id string (int16 length, UTF-8)
- value, version 0 (flexible): epoch int32, metadata hash int64, no tagged fields
"""

from __future__ import annotations

import struct

from protocol.errors import ProtocolException

KEY_VERSION = 11  # ShareGroupMetadataKey: the record type among the coordinator's records
VALUE_VERSION = 0

_I16 = struct.Struct(">h")
_VALUE = struct.Struct(">hiqB")  # version, epoch, metadata hash, no tagged fields (uvarint 0)


class InvalidShareGroupRecord(ProtocolException, ValueError):
    pass


def encode_key(group_id: str) -> bytes:
    data = group_id.encode()
    return _I16.pack(KEY_VERSION) + _I16.pack(len(data)) + data


def encode_value(epoch: int, metadata_hash: int = 0) -> bytes:
    return _VALUE.pack(VALUE_VERSION, epoch, metadata_hash, 0)


def decode_key(buf: bytes) -> str | None:
    """The share group's id, or None for a key of another kind (an offset, a consumer group's).

    :raises InvalidShareGroupRecord: a share-group key that does not parse.
    """
    try:
        (version,) = _I16.unpack_from(buf, 0)
        if version != KEY_VERSION:
            return None
        (length,) = _I16.unpack_from(buf, _I16.size)
        start = 2 * _I16.size
        if length < 0 or start + length != len(buf):
            raise InvalidShareGroupRecord(f"group id of {length} bytes in a {len(buf)}-byte key")
        return buf[start:].decode()
    except (struct.error, UnicodeDecodeError) as e:
        raise InvalidShareGroupRecord(f"share group key: {e}") from e
