"""An older librdkafka (Debian's kcat, librdkafka 2.0.x) compresses what it produces.

librdkafka before the fix of its issue 4956 turns compression off ("Broker does not support
compression type ...: not compressing batch") unless ApiVersions lists Produce from v0. Kafka 4
therefore lists Produce from v0 while serving it from v3 (ApiKeys.
PRODUCE_API_VERSIONS_RESPONSE_MIN_VERSION, KAFKA-18659), and so does Shoal. The stored batches
show the codec kcat was asked for. Skipped when kcat is not installed (Debian package `kcat`).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from protocol.record_batch import Compression
from protocol.record_batch import iter_batch_headers
from tests.compat.support import create_topic
from tests.compat.support import start_broker

pytestmark = [
    pytest.mark.compat,
    pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed"),
]


@pytest.mark.parametrize(
    ("codec", "expected"),
    [("snappy", Compression.SNAPPY), ("gzip", Compression.GZIP), ("lz4", Compression.LZ4)],
)
def test_kcat_produces_compressed_batches(
    tmp_path: Path, codec: str, expected: Compression
) -> None:
    data = tmp_path / "data"
    broker = start_broker(data)
    try:
        create_topic(broker.bootstrap, "squeezed", 1)
        lines = "".join(f"record number {i} " * 8 + "\n" for i in range(50))
        subprocess.run(
            ["kcat", "-P", "-b", broker.bootstrap, "-t", "squeezed", "-p", "0", "-z", codec,
             "-X", "linger.ms=200"],
            input=lines.encode(), check=True, timeout=30, capture_output=True,
        )  # fmt: skip
    finally:
        broker.stop()
    (segment,) = (data / "squeezed-0").glob("*.log")
    codecs = {h.compression for _, h in iter_batch_headers(segment.read_bytes()) if h.record_count}
    assert codecs == {expected}, f"kcat sent {codecs}, asked for {codec}"
