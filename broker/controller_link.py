"""How a process that is not the controller (node 0) follows it and asks it for topics.

With `--processes N` only node 0 writes `__topics` and the config files (docs/multicore.md);
the others read them again when they change (`follow_controller`). A producer asks any
broker for Metadata with auto-creation on, as Kafka's brokers forward such a creation to the
controller (KIP-590, `AutoTopicCreationManager`): so does this one, with CreateTopics to node 0
over the kept node link (`broker.node_link`: the inter-node listener's own address, its TLS
and login), and then reads the topic file node 0 wrote before it answered.
"""

from __future__ import annotations

import asyncio
import datetime

import structlog
from kio.schema.create_topics import v7 as create_topics
from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName
from kio.static.primitive import i16
from kio.static.primitive import i32
from kio.static.primitive import i32Timedelta

from broker.context import BrokerServices
from broker.node_link import REQUEST_TIMEOUT_S
from broker.ownership import CONTROLLER
from storage.topics import TopicInfo
from storage.topics import topic_file_stats

log = structlog.get_logger("shoal.controller")


async def create_on_controller(s: BrokerServices, name: str, partitions: int) -> TopicInfo | None:
    """The topic, made by the controller (or found made already); None if it could not be.

    The controller's own answer (an invalid name...) is logged and the client sees the topic
    as unknown, as it would on a refused auto-creation."""
    links = s.node_links
    assert links is not None  # every process of N > 1 has them
    topic = create_topics.request.CreatableTopic(
        name=TopicName(name), num_partitions=i32(partitions), replication_factor=i16(1),
        assignments=(), configs=(),
    )  # fmt: skip
    body = create_topics.CreateTopicsRequest(
        topics=(topic,),
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=REQUEST_TIMEOUT_S)),
        validate_only=False,
    )
    try:  # bounded: a node 0 that never answers (or never finishes a TLS handshake) is down
        answer = await links.request(CONTROLLER, body, REQUEST_TIMEOUT_S)
    except (OSError, TimeoutError) as e:
        log.warning("controller not reachable for an auto-creation", topic=name,
                    error=str(e) or type(e).__name__)  # fmt: skip
    else:
        (result,) = answer.topics
        if result.error_code not in (ErrorCode.none, ErrorCode.topic_already_exists):
            error = ErrorCode(result.error_code).name
            log.info("auto-creation refused by the controller", topic=name, error=error,
                     message=result.error_message)  # fmt: skip
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


async def recheck_topic_files(s: BrokerServices) -> None:
    """When `__topics` changed since the last check, a stat of every topic file, made in a
    thread (20,000 stats held the loop 84-142 ms here), then the files it shows changed read
    again: `refresh_topics` goes by inode, and ext4 reuses a freed inode at once. A duty of
    the other processes, beside `follow_controller`."""
    logs = s.logs
    stamp = logs.topic_files_unchecked()
    if stamp is None:
        return
    stats = await asyncio.to_thread(topic_file_stats, logs.meta_dir)
    logs.recheck_topic_files(stamp, stats)
    logs.refresh_topics()
