"""A producer id is never handed out twice, transactional ids included: an id given to a
transactional producer that never wrote is in no partition, only in `__transaction_state`,
so a broker whose `producer-ids` file is lost starts above it too (promise 2; Kafka's ids come
from the controller's `ProducerIdsRecord`s, never reused)."""

from __future__ import annotations

from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from tests.brokers import make_server

pytestmark = pytest.mark.integration


async def test_a_lost_producer_ids_file_never_hands_out_a_transactional_ids_producer_id(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    first = make_server(data)
    await first.start()
    services = first.services
    for _ in range(2500):  # past two blocks, so the lost file cannot be rebuilt from blocks alone
        services.producer_ids.allocate()
    given = services.transactions.init_producer_id("quiet", 60_000, None, services.now_ms())
    assert given.error_code is ErrorCode.none
    await first.stop()
    (data / "producer-ids").unlink()

    second = make_server(data)
    await second.start()
    try:
        assert second.services.producer_ids.allocate() > given.producer_id
    finally:
        await second.stop()
