"""The routing table: API key -> handler, with the versions each handler serves.

A handler is declared by the kio request classes it serves, so its API key, name and version
range come from kio, never from a literal. It must also declare the ACL checks it makes
(operation, resource type), as Kafka's authorization table lists them per API: the checks run
in the handler, which alone knows the resources a request names, and the declaration (required,
`()` only for ApiVersions) makes every handler's author decide and lets a test hold the table
against Kafka's. ApiVersions answers from this table, so what is
advertised is exactly what is registered.

The table is generic in the context its handlers take (`Handler[C]`): it only passes the
context through, so it sits below `broker.context`, which holds the broker's
`Registry[RequestContext]` and names its handlers' type (`RequestHandler`).
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Coroutine
from collections.abc import Iterable
from collections.abc import Iterator
from dataclasses import dataclass
from dataclasses import field
from typing import Any
from typing import Generic
from typing import Never
from typing import TypeVar
from typing import cast

from kio.static.constants import EntityType
from kio.static.protocol import RequestPayload
from kio.static.protocol import ResponsePayload

from broker.errors import BrokerException
from protocol.acl import AclOperation
from protocol.acl import ResourceType
from protocol.messages import EncodedResponse
from protocol.messages import entity_tagged_defaults
from protocol.messages import response_type

C = TypeVar("C")  # the context a handler takes (the broker's: `broker.context.RequestContext`)

# A handler takes the union of the request classes it serves; `Never` accepts any such
# parameter type, and `Handler.dispatch` is the one place that calls it with a request.
# A handler answers with a kio response, with the bytes of one written by a hot API's own
# serialiser (`EncodedResponse`), or with None (no answer: Produce with acks=0).
Answer = ResponsePayload | EncodedResponse | None
# An `async def`: the connection runs its first step itself (see `KafkaConnection._serve`).
HandleFn = Callable[[C, Never], Coroutine[Any, Any, Answer]]
AclCheck = tuple[AclOperation, ResourceType]
_Dispatchable = Callable[[C, RequestPayload], Coroutine[Any, Any, Answer]]


def _version(entity: type[RequestPayload] | type[ResponsePayload]) -> int:
    return int(entity.__version__)


class WrongResponse(BrokerException, TypeError):
    """A handler returned a class other than the one it declared for the request's version."""


@dataclass(frozen=True, slots=True)
class Handler(Generic[C]):
    # Every version served: kio request classes of one API key, contiguous versions.
    requests: tuple[type[RequestPayload], ...]
    # A handler whose response may be skipped (Produce with acks=0) returns None.
    handle: HandleFn[C]
    # The response classes `handle` returns: each version is answered with the oldest of them
    # at least as new as the request (see `response_for`), encoded with the request version's
    # writer, which reads only that version's fields.
    responses: tuple[type[ResponsePayload], ...]
    # The authorization checks `handle` makes, by operation and resource type.
    acl: tuple[AclCheck, ...] = ()
    # Whether an answer may be bulky though its request is small (DescribeAcls of every
    # binding): the connection counts its entries before encoding it on the loop. False for
    # a hot API whose answer is as long as its request (a frame decoded on the loop names
    # ~10,000 partitions at most: tens of milliseconds to encode).
    bulky_answers: bool = True
    # The oldest version ApiVersions lists, when older than the oldest served (Produce: see
    # `handler`); None: the oldest served.
    advertise_from: int | None = None
    _response_by_version: dict[int, type[ResponsePayload]] = field(
        init=False, repr=False, compare=False
    )
    # Read per request: computed once (properties over `requests` cost a call each).
    api_key: int = field(init=False, repr=False, compare=False)
    name: str = field(init=False, repr=False, compare=False)
    min_version: int = field(init=False, repr=False, compare=False)
    max_version: int = field(init=False, repr=False, compare=False)
    advertised_min_version: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.requests:
            raise ValueError("a handler serves at least one request version")
        object.__setattr__(self, "name", self.requests[0].__name__.removesuffix("Request"))
        requests = tuple(sorted(self.requests, key=_version))
        keys = {r.__api_key__ for r in requests} | {r.__api_key__ for r in self.responses}
        if len(keys) != 1:
            raise ValueError(f"{self.name}: classes of several api keys {sorted(keys)}")
        versions = [int(r.__version__) for r in requests]
        if versions != list(range(versions[0], versions[0] + len(versions))):
            raise ValueError(f"{self.name}: versions {versions} are not one contiguous range")
        if any(r.__type__ is not EntityType.request for r in requests):
            raise ValueError(f"{self.name}: requests must be kio request classes")
        if not self.responses or any(r.__type__ is not EntityType.response for r in self.responses):
            raise ValueError(f"{self.name}: responses must be kio response classes")
        families = sorted(self.responses, key=_version)
        by_version = {
            v: next((f for f in families if f.__version__ >= v), families[-1]) for v in versions
        }
        for v, family in by_version.items():
            wire = response_type(self.api_key_of(requests), v)
            if family.__version__ != v and (paths := entity_tagged_defaults(wire)):
                raise ValueError(
                    f"{self.name}: v{v} has tagged fields with entity defaults {list(paths)}; "
                    f"answer it with its own classes (add v{v} to `responses`)"
                )
        object.__setattr__(self, "requests", requests)
        object.__setattr__(self, "_response_by_version", by_version)
        object.__setattr__(self, "api_key", self.api_key_of(requests))
        object.__setattr__(self, "min_version", versions[0])
        object.__setattr__(self, "max_version", versions[-1])
        advertised = versions[0] if self.advertise_from is None else self.advertise_from
        if not 0 <= advertised <= versions[0]:
            raise ValueError(
                f"{self.name}: advertised from v{advertised}, served from v{versions[0]}"
            )
        object.__setattr__(self, "advertised_min_version", advertised)

    @staticmethod
    def api_key_of(requests: tuple[type[RequestPayload], ...]) -> int:
        return int(requests[0].__api_key__)

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    def response_for(self, version: int) -> type[ResponsePayload]:
        """The response class that answers a request of `version`."""
        return self._response_by_version[version]

    async def dispatch(self, ctx: C, request: RequestPayload) -> Answer:
        """Run the handler on a request of one of its versions, and check what it returns."""
        if type(request) not in self.requests:
            raise TypeError(f"{self.name} does not serve {type(request).__qualname__}")
        response = await cast(_Dispatchable[C], self.handle)(ctx, request)
        return self.checked(request.__version__, response)

    def run(self, ctx: C, request: RequestPayload) -> Coroutine[Any, Any, Answer]:
        """The handler's coroutine, without `dispatch`'s type check: for a caller that read
        `request` with the kio class of a version this handler `supports` (the connection).
        Check its answer with `checked`."""
        return cast(_Dispatchable[C], self.handle)(ctx, request)

    def checked(self, version: int, response: Answer) -> Answer:
        """`response`, if it is what this handler declared for a request of `version`.

        :raises WrongResponse: it is not.
        """
        if response is None:
            return None
        if type(response) is EncodedResponse:
            if response.api_key != self.api_key or response.version != version:
                raise WrongResponse(
                    f"{self.name} v{version} returned encoded bytes of api key "
                    f"{response.api_key} v{response.version}"
                )
            return response
        expected = self._response_by_version[version]
        if type(response) is not expected:
            raise WrongResponse(
                f"{self.name} v{version} returned {type(response).__module__}, "
                f"declared {expected.__module__}"
            )
        return response


def handler(
    handle: HandleFn[C],
    *requests: type[RequestPayload],
    responses: tuple[type[ResponsePayload], ...] | None = None,
    acl: tuple[AclCheck, ...],
    bulky_answers: bool = True,
    advertise_from: int | None = None,
) -> Handler[C]:
    """Declare a handler by the kio request classes it serves and the ACL checks it makes.

    `responses` defaults to the response class of the newest version served. `advertise_from`
    lists older versions in ApiVersions than are served, for Kafka's one such case (Produce);
    a request of one of them is refused as any unserved version is.
    """
    if responses is None and requests:
        newest = max(requests, key=_version)
        responses = (response_type(newest.__api_key__, newest.__version__),)
    return Handler(
        requests=requests,
        handle=handle,
        responses=responses or (),
        acl=acl,
        bulky_answers=bulky_answers,
        advertise_from=advertise_from,
    )


class Registry(Generic[C]):
    def __init__(self, handlers: Iterable[Handler[C]] = ()) -> None:
        # Read by each connection per request (a dict lookup costs less than a `get` call).
        self.by_key: dict[int, Handler[C]] = {}
        for h in handlers:
            self.register(h)

    def register(self, handler: Handler[C]) -> None:
        if handler.api_key in self.by_key:
            raise ValueError(f"api key {handler.api_key} ({handler.name}) registered twice")
        self.by_key[handler.api_key] = handler

    def get(self, api_key: int) -> Handler[C] | None:
        return self.by_key.get(api_key)

    def __iter__(self) -> Iterator[Handler[C]]:
        return iter(self.by_key[key] for key in sorted(self.by_key))
