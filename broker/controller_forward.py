"""A change only node 0 writes, asked of it by another process of `shoal serve --processes N`.

Kafka's brokers forward CreateAcls, DeleteAcls and AlterUserScramCredentials to the controller
(KIP-590, `ForwardingManager`) and answer with its answer; so do these processes, over the
kept connection to node 0 (`broker.node_link`), as the processes' own principal
(`broker.node_identity`): the client's principal was authorized here, by ACLs that follow
node 0's. As Kafka's `NodeToControllerChannelManager` does, a request that could not reach
node 0 is tried again until a deadline; past it the client gets REQUEST_TIMED_OUT (Kafka's
`ForwardingManagerImpl.onTimeout`), and a refused login UNKNOWN_SERVER_ERROR (its answer to an
authentication error on the forwarding channel).
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import structlog
from kio.schema.errors import ErrorCode
from kio.static.protocol import RequestPayload

from broker.context import BrokerServices
from broker.errors import BrokerException
from broker.ownership import CONTROLLER
from client.security import AuthenticationError

log = structlog.get_logger("shoal.controller")

# Kafka's brokers keep a forwarded request queued for 60 s while the controller is away
# (`BrokerServer`: the "forwarding" `NodeToControllerChannelManagerImpl`, retryTimeoutMs
# 60000): node 0 restarted by the supervisor on a loaded machine takes more than 10.
FORWARD_TIMEOUT_S = 60.0
FIRST_RETRY_S = 0.1
MAX_RETRY_S = 1.0


class NotForwarded(BrokerException):
    """Node 0 did not answer: the code to answer the client with."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


def forwards(s: BrokerServices) -> bool:
    """Whether this process hands its ACL and SCRAM changes to node 0."""
    return not s.config.ownership.is_controller and s.node_links is not None


async def forward(s: BrokerServices, body: RequestPayload) -> Any:
    """Node 0's answer to `body`.

    :raises NotForwarded: no answer before the deadline, or node 0 refused our login."""
    links = s.node_links
    assert links is not None  # every process of N > 1 has them
    loop = asyncio.get_running_loop()
    deadline = loop.time() + FORWARD_TIMEOUT_S
    wait = FIRST_RETRY_S
    while True:
        try:
            return await links.request(CONTROLLER, body, max(0.1, deadline - loop.time()))
        except AuthenticationError as e:
            log.error("node 0 refused this process's login; change not forwarded", error=str(e))
            raise NotForwarded(ErrorCode.unknown_server_error, "controller login failed") from e
        except TimeoutError as e:
            raise NotForwarded(ErrorCode.request_timed_out, "the controller did not answer") from e
        except OSError as e:
            if loop.time() + wait >= deadline:
                log.warning("controller not reachable; change not forwarded", error=str(e))
                raise NotForwarded(
                    ErrorCode.request_timed_out, "the controller is not reachable"
                ) from e
            await asyncio.sleep(wait)
            wait = min(MAX_RETRY_S, wait * 2)


def fields(entity: object) -> dict[str, Any]:
    """An entity's fields by name: to build the same entity of a newer version."""
    return {f.name: getattr(entity, f.name) for f in dataclasses.fields(entity)}  # type: ignore[arg-type]
