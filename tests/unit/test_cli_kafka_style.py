"""Kafka's tool lines are moved into Shoal's subcommand form; Shoal's own lines are untouched."""

from __future__ import annotations

import pytest

from cli.kafka_style import KafkaStyleError
from cli.kafka_style import rewrite


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("share-groups --bootstrap-server h:1 --describe --group g --members",
         "share-groups describe --bootstrap-server h:1 --group g --members"),
        ("share-groups --delete-offsets --group g --topic t",
         "share-groups delete-offsets --group g --topic t"),
        ("topics --create --topic t --partitions 3", "topics create --topic t --partitions 3"),
        ("configs --entity-type topics --entity-name t --alter --add-config a=1",
         "configs alter --entity-type topics --entity-name t --add-config a=1"),
        ("share-groups describe --group g", "share-groups describe --group g"),
        ("consumer-groups --list", "consumer-groups --list"),
        ("topics --help", "topics --help"),
    ],
)  # fmt: skip
def test_rewrite(line: str, expected: str) -> None:
    assert rewrite(line.split()) == expected.split()


@pytest.mark.parametrize("line", ["topics --topic t", "topics --list --describe"])
def test_no_action_or_several_is_an_error(line: str) -> None:
    with pytest.raises(KafkaStyleError, match="exactly one of --create"):
        rewrite(line.split())
