"""An asyncio Kafka client on kio: producer, admin, and a KIP-932 share consumer with RENEW.

Imports only `protocol`, kio and the standard library: the CLI, the Spark source and the tests
use it against Shoal or any Kafka broker with share groups.

The names below load on first use (PEP 562): a process that needs one module (a Spark task
decoding record batches, say) does not pay ~0.3 s for the admin client's every kio schema.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING
from typing import Any

if TYPE_CHECKING:
    from client.admin import Admin
    from client.admin import ConfigResourceType
    from client.cluster import Cluster
    from client.cluster import TopicInfo
    from client.errors import ClientStateError
    from client.errors import KafkaError
    from client.errors import UnsupportedVersionError
    from client.producer import Producer
    from client.records import ConsumerRecord
    from client.records import Record
    from client.share_acks import AcknowledgeType
    from client.share_consumer import ShareConsumer

# Each exported name and the module that defines it.
_HOMES = {
    "AcknowledgeType": "client.share_acks",
    "Admin": "client.admin",
    "ClientStateError": "client.errors",
    "Cluster": "client.cluster",
    "ConfigResourceType": "client.admin",
    "ConsumerRecord": "client.records",
    "KafkaError": "client.errors",
    "Producer": "client.producer",
    "Record": "client.records",
    "ShareConsumer": "client.share_consumer",
    "TopicInfo": "client.cluster",
    "UnsupportedVersionError": "client.errors",
}

__all__ = [
    "AcknowledgeType",
    "Admin",
    "ClientStateError",
    "Cluster",
    "ConfigResourceType",
    "ConsumerRecord",
    "KafkaError",
    "Producer",
    "Record",
    "ShareConsumer",
    "TopicInfo",
    "UnsupportedVersionError",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'client' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # found directly from now on
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})
