"""DeleteRecords (21) against a real broker over a real socket, through the client's Admin.

What confluent-kafka sees is in tests/compat/test_delete_records.py; here, what it cannot
cause: a write that fails (the disk is full when the log start is saved) answers
KAFKA_STORAGE_ERROR and leaves the low watermark as it was; the retry then succeeds.
"""

from __future__ import annotations

import datetime
import errno
import os

import pytest
from kio.schema.delete_records import v2
from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName
from kio.static.primitive import i32
from kio.static.primitive import i32Timedelta
from kio.static.primitive import i64

from broker.server import Server
from client.admin import Admin
from client.errors import KafkaError
from client.producer import Producer

pytestmark = pytest.mark.integration


async def test_a_failed_write_answers_storage_error_and_moves_nothing(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    bootstrap = f"127.0.0.1:{server.port}"
    async with Admin(bootstrap) as admin, Producer(bootstrap) as producer:
        await admin.create_topic("full", 1)
        for i in range(10):
            await producer.send("full", b"%d" % i, partition=0)
        assert await admin.delete_records({("full", 0): 3}) == {("full", 0): 3}

        def no_space(fd: int) -> None:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        monkeypatch.setattr(os, "fsync", no_space)
        with pytest.raises(KafkaError) as info:
            await admin.delete_records({("full", 0): 7})
        monkeypatch.undo()
        assert info.value.error_code == ErrorCode.kafka_storage_error
        assert await admin.list_offsets("full", 0, "earliest") == 3
        plog = server.services.logs.log("full", 0)
        assert plog is not None and plog.log_start_offset == 3

        assert await admin.delete_records({("full", 0): 7}) == {("full", 0): 7}
        assert await admin.list_offsets("full", 0, "earliest") == 7
        with pytest.raises(KafkaError) as past:
            await admin.delete_records({("full", 0): 11})
        assert past.value.error_code == ErrorCode.offset_out_of_range
        # The client refuses a partition it does not know; the broker too, if asked.
        resp = await admin.cluster.request(
            v2.DeleteRecordsRequest(
                timeout=i32Timedelta.parse(datetime.timedelta(seconds=5)),
                topics=tuple(
                    v2.request.DeleteRecordsTopic(
                        name=TopicName(name),
                        partitions=(
                            v2.request.DeleteRecordsPartition(
                                partition_index=i32(partition), offset=i64(1)
                            ),
                        ),
                    )
                    for name, partition in (("nope", 0), ("full", 1))
                ),
            )
        )
        assert [
            (t.partitions[0].error_code, t.partitions[0].low_watermark) for t in resp.topics
        ] == [(ErrorCode.unknown_topic_or_partition, -1)] * 2
