"""Which process of `shoal serve --processes N` owns a partition or a group (docs/multicore.md).

Ownership is static, fixed by N alone, so the processes never talk to agree on it: partition
`p` of the topic with id `t` is led by node `(crc32(t.bytes) + p) % N`; a group (any kind) is
coordinated by node `crc32(group id) % N`, as Kafka maps a group to a `__consumer_offsets`
partition by a hash of its id. Node 0 is the controller: the one writer of topics, topic and
group configs, the cluster's dynamic broker configs, ACLs and SCRAM users.

With N = 1 (the default) the one process owns everything under its configured `node.id`, as
before this module existed.
"""

from __future__ import annotations

import uuid
import zlib
from dataclasses import dataclass
from pathlib import Path

CONTROLLER = 0  # the node that writes topics and configs when N > 1
NODES_DIR = "__nodes"  # under the data dir: each process's own files, `__nodes/<id>`


def topic_hash(topic_id: uuid.UUID) -> int:
    return zlib.crc32(topic_id.bytes)


def group_hash(group_id: str) -> int:
    return zlib.crc32(group_id.encode())


@dataclass(frozen=True, slots=True)
class Ownership:
    """This process's place among `nodes` processes (`node_id` in 0..nodes-1 when nodes > 1)."""

    node_id: int
    nodes: int = 1

    @property
    def single(self) -> bool:
        return self.nodes == 1

    @property
    def is_controller(self) -> bool:
        return self.single or self.node_id == CONTROLLER

    @property
    def controller_id(self) -> int:
        return self.node_id if self.single else CONTROLLER

    def node_ids(self) -> range:
        return range(self.node_id, self.node_id + 1) if self.single else range(self.nodes)

    def first_leader(self, topic_id: uuid.UUID | None) -> int:
        """The leader of the topic's partition 0; partition p's is (this + p) % N."""
        if self.single or topic_id is None:
            return self.node_id
        return topic_hash(topic_id) % self.nodes

    def leader(self, topic_id: uuid.UUID | None, partition: int) -> int:
        if self.single or topic_id is None:
            return self.node_id
        return (topic_hash(topic_id) + partition) % self.nodes

    def leads(self, topic_id: uuid.UUID | None, partition: int) -> bool:
        return self.single or self.leader(topic_id, partition) == self.node_id

    def coordinator(self, group_id: str) -> int:
        """The node coordinating a group (share, consumer or classic) or transactional id."""
        return self.node_id if self.single else group_hash(group_id) % self.nodes

    def coordinates(self, group_id: str) -> bool:
        return self.single or self.coordinator(group_id) == self.node_id

    def port_of(self, node: int, my_port: int) -> int:
        """A listener's port on `node`, given this process's: every node listens at the
        configured port + its id."""
        return my_port - self.node_id + node

    def node_dir(self, data_dir: Path) -> Path:
        """Where this process keeps the files no other process may touch (its lock, recovery
        points and clean-shutdown marker, producer-id block, `__consumer_offsets-0` and
        `__transaction_state-0`, and with N > 1 its own dynamic broker configs): the data dir
        itself when N = 1, else `<data dir>/__nodes/<id>` (a name no partition directory can
        have: those end in `-<partition>`, and rebuilding topics reads them). Share snapshot
        files are not here: they live in `<data dir>/__share_state/<topic>-<p>/`, touched only
        by the partition's leader, and move with the partition when N changes."""
        return data_dir if self.single else data_dir / NODES_DIR / str(self.node_id)
