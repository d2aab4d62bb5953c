"""How a process that is not the controller (node 0) follows it and asks it for topics.

With `--processes N` only node 0 writes `__topics` and the config files (docs/multicore.md);
the others read them again when they change (`follow_controller`). A producer asks any
broker for Metadata with auto-creation on, as Kafka's brokers forward such a creation to the
controller (KIP-590, `AutoTopicCreationManager`): so does this one, with CreateTopics from our
own client to node 0, and then reads the topic file node 0 wrote before it answered.
"""

from __future__ import annotations

import asyncio

import structlog
from kio.schema.errors import ErrorCode

from broker.context import BrokerServices
from broker.node_link import REQUEST_TIMEOUT_S
from client.admin import Admin
from client.errors import KafkaError
from storage.topics import TopicInfo

log = structlog.get_logger("shoal.controller")

WILDCARDS = ("", "0.0.0.0", "::")


def controller_address(s: BrokerServices) -> str:
    owner = s.config.ownership
    inter = s.config.inter_node_listener  # one host: its own address, never the advertised
    host, port = inter.host, inter.port
    return (
        f"{'127.0.0.1' if host in WILDCARDS else host}:{owner.port_of(owner.controller_id, port)}"
    )


async def create_on_controller(s: BrokerServices, name: str, partitions: int) -> TopicInfo | None:
    """The topic, made by the controller (or found made already); None if it could not be.

    The controller's own answer (an invalid name...) is logged and the client sees the topic
    as unknown, as it would on a refused auto-creation."""
    security = s.node_links.security if s.node_links is not None else None

    async def create() -> None:
        async with Admin(
            controller_address(s), client_id=f"shoal-node-{s.node_id}", security=security
        ) as admin:
            await admin.create_topic(name, partitions)

    try:  # bounded as the node links are: a node 0 that never answers (or never finishes a
        # TLS handshake) is one that is not reachable
        await asyncio.wait_for(create(), REQUEST_TIMEOUT_S)
    except KafkaError as e:
        if e.error_code != ErrorCode.topic_already_exists:
            log.info("auto-creation refused by the controller", topic=name, error=str(e))
    except (OSError, TimeoutError) as e:
        log.warning("controller not reachable for an auto-creation", topic=name,
                    error=str(e) or type(e).__name__)  # fmt: skip
    s.logs.refresh_topics()
    return s.logs.topic(name)


FOLLOW_INTERVAL_MS = 1000


def follow_controller(s: BrokerServices) -> None:
    """What the controller wrote since the last look: topics (`__topics`), group configs and
    dynamic broker configs; each a stat when nothing changed. A duty of the other processes
    (`Server.start`), also run when a request names a topic not known yet."""
    s.logs.refresh_topics()
    s.group_configs.reload()
    s.dynamic_configs.reload()
