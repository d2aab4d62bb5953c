"""An asyncio Kafka client on kio: producer, admin, and a KIP-932 share consumer with RENEW.

Imports only `protocol`, kio and the standard library: the CLI, the Spark source and the tests
use it against Shoal or any Kafka broker with share groups.
"""

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
