"""The classic member assignment bytes `shoal consumer-groups --describe` decodes: Kafka's
ConsumerProtocolAssignment, whatever its version, and anything else without a crash."""

from __future__ import annotations

import struct

import pytest

from client.group_describe import decode_assignment


def _assignment(version: int, topics: dict[str, list[int]], user_data: bytes = b"") -> bytes:
    out = struct.pack(">hi", version, len(topics))
    for topic, partitions in topics.items():
        name = topic.encode()
        out += struct.pack(">h", len(name)) + name
        out += struct.pack(f">i{len(partitions)}i", len(partitions), *partitions)
    return out + struct.pack(">i", len(user_data)) + user_data


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_every_version_gives_its_partitions(version: int) -> None:
    data = _assignment(version, {"orders": [0, 2], "audit": [5]}, user_data=b"sticky")
    assert decode_assignment(data) == {"orders": (0, 2), "audit": (5,)}


@pytest.mark.parametrize(
    "data",
    [b"", b"\x00", _assignment(0, {"orders": [0, 1]})[:12], b"\x00\x00\x00\x00\x00\x01\x7f\xff"],
)
def test_other_bytes_give_no_partitions(data: bytes) -> None:
    assert decode_assignment(data) == {}


def test_an_empty_assignment() -> None:
    assert decode_assignment(_assignment(0, {})) == {}
