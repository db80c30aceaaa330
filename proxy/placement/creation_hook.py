"""The relay hook of the creation guard: CreateTopics (19) and CreatePartitions (37).

Per topic of a request, the topic's explicit replica assignments (if any) are
checked with :func:`~proxy.placement.guard.refusal` against the racks
of the current cluster view and the topic's min.insync.racks (a CreateTopics
config of that name where the request sets one, else the proxy's rule):

- no topic refused (or observe mode, or a view without brokers yet): the
  original bytes go upstream, answer untouched;
- every topic refused: the proxy answers itself with INVALID_REPLICA_ASSIGNMENT
  (39) and the reason per topic; nothing goes upstream;
- mixed: a request without the refused topics goes upstream and the broker's
  answer is merged with the refusals, in the order of the request.

``validate_only`` needs nothing special: a refused topic gets the same answer
whether or not the client only validates, and nothing of it reaches the broker.
In observe mode refusals are logged and counted, never applied. Every decision
about a checked topic (one with explicit assignments and N > 1) is counted
(``record(api, decision)``: ``refused``, ``observed_refusal`` or ``passed``).

Invariant: the hook never turns a broker's error into success; it only adds
errors for topics the broker never saw.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Generic, Protocol, TypeVar

from protocol.create_partitions import (
    CreatePartitionsResponse,
    encode_create_partitions_request,
    encode_create_partitions_response,
    parse_create_partitions_request,
    parse_create_partitions_response,
)
from protocol.create_partitions import TopicResult as PartitionsResult
from protocol.create_topics import (
    CreateTopicsResponse,
    TopicResult,
    encode_create_topics_request,
    encode_create_topics_response,
    parse_create_topics_request,
    parse_create_topics_response,
)
from protocol.headers import RequestHeader, parse_request_header
from proxy.cluster.view import ClusterView
from proxy.placement.guard import (
    INVALID_REPLICA_ASSIGNMENT,
    refusal,
    requested_min_racks,
)
from proxy.relay.actions import Action, ClientInfo, Forward, Reply

log = logging.getLogger("rackguard.placement")

CREATE_TOPICS = 19
CREATE_PARTITIONS = 37
API_LABEL = {CREATE_TOPICS: "CreateTopics", CREATE_PARTITIONS: "CreatePartitions"}


class Named(Protocol):
    @property
    def name(self) -> str: ...


R = TypeVar("R", bound=Named)


def in_request_order(order: list[str], answered: Iterable[R], refused: Mapping[str, R]
                     ) -> tuple[R, ...]:
    """The broker's per-topic results and the proxy's refusals, in the request's order."""
    results = {r.name: r for r in answered}
    return tuple(results.get(n) or refused[n] for n in order if n in results or n in refused)


@dataclass(frozen=True, slots=True)
class GuardSettings:
    required: Callable[[str], int]  # the proxy's min.insync.racks for a topic name
    observe: bool


@dataclass(frozen=True, slots=True)
class _Split(Generic[R]):
    """What one API's codec gives :meth:`CreationGuard._apply`: a refused topic's result,
    a whole answer of refusals, the request without the refused topics, and the broker's
    answer merged with the refusals (in the request's order)."""

    refused: Callable[[str, str], R]
    answer: Callable[[tuple[R, ...]], bytes]
    without_refused: Callable[[], bytes]
    merge: Callable[[memoryview, int, Mapping[str, R]], bytes]


class CreationGuard:
    """``RequestHook`` for CreateTopics and CreatePartitions."""

    def __init__(self, view: Callable[[], ClusterView], settings: Callable[[], GuardSettings],
                 record: Callable[[str, str], None]) -> None:
        self._view = view
        self._settings = settings
        self._record = record

    def __call__(self, client: ClientInfo, frame: memoryview, api_key: int, api_version: int,
                 corr: int) -> Action:
        view = self._view()
        if not view.brokers:
            return Forward(frame)  # no racks known yet: the broker decides alone
        header = parse_request_header(frame)
        if api_key == CREATE_TOPICS:
            return self._create_topics(client, frame, header, view)
        return self._create_partitions(client, frame, header, view)

    def _judge(self, client: ClientInfo, api_key: int, refusals: dict[str, str],
               checked: int) -> bool:
        """Count and log; True when the refusals are to be applied."""
        api = API_LABEL[api_key]
        observe = self._settings().observe
        for _ in range(checked - len(refusals)):
            self._record(api, "passed")
        for message in refusals.values():
            self._record(api, "observed_refusal" if observe else "refused")
            log.warning("%s from %s %s: %s", api, client.peer,
                        "would be refused (observe mode)" if observe else "refused", message)
        return bool(refusals) and not observe

    def _apply(self, client: ClientInfo, api_key: int, frame: memoryview,
               header: RequestHeader, order: list[str], refusals: dict[str, str], checked: int,
               split: _Split[R]) -> Action:
        """What the refusals make of a request whose topics are ``order``: the original
        bytes (none applied), the proxy's own answer (every topic refused), or the
        request without the refused topics and its answer merged with the refusals."""
        if len(set(order)) != len(order):
            return Forward(frame)  # a name given twice: the broker answers INVALID_REQUEST
        if not self._judge(client, api_key, refusals, checked):
            return Forward(frame)
        synthetic = {name: split.refused(name, why) for name, why in refusals.items()}
        if all(name in refusals for name in order):
            return Reply(split.answer(tuple(synthetic[n] for n in order)))

        def merge(answer: memoryview, answer_version: int) -> object:
            return split.merge(answer, answer_version, synthetic)

        return Forward(split.without_refused(), True, merge)

    def _create_topics(self, client: ClientInfo, frame: memoryview, header: RequestHeader,
                       view: ClusterView) -> Action:
        request = parse_create_topics_request(frame, header)
        settings = self._settings()
        refusals: dict[str, str] = {}
        checked = 0
        for t in request.topics:
            if not t.assignments:
                continue
            n = requested_min_racks({c.name: c.value for c in t.configs},
                                    settings.required(t.name))
            if n <= 1:
                continue
            checked += 1
            why = refusal(t.name, n, [(a.partition_index, a.broker_ids) for a in t.assignments],
                          view.racks)
            if why is not None:
                refusals[t.name] = why
        order = [t.name for t in request.topics]

        def merge(answer: memoryview, version: int, synthetic: Mapping[str, TopicResult]) -> bytes:
            response = parse_create_topics_response(answer, version)
            return encode_create_topics_response(version, header.correlation_id, replace(
                response, topics=in_request_order(order, response.topics, synthetic)))

        split = _Split(
            refused=lambda name, why: TopicResult(name, INVALID_REPLICA_ASSIGNMENT, why),
            answer=lambda results: encode_create_topics_response(
                header.api_version, header.correlation_id, CreateTopicsResponse(0, results)),
            without_refused=lambda: encode_create_topics_request(frame, header, replace(
                request, topics=tuple(t for t in request.topics if t.name not in refusals))),
            merge=merge)
        return self._apply(client, CREATE_TOPICS, frame, header, order, refusals, checked, split)

    def _create_partitions(self, client: ClientInfo, frame: memoryview, header: RequestHeader,
                           view: ClusterView) -> Action:
        request = parse_create_partitions_request(frame, header)
        settings = self._settings()
        refusals: dict[str, str] = {}
        checked = 0
        for t in request.topics:
            n = settings.required(t.name)
            if not t.assignments or n <= 1:
                continue
            checked += 1
            known = view.topics.get(t.name)
            first = len(known.partitions) if known is not None else t.count - len(t.assignments)
            why = refusal(t.name, n, list(enumerate(t.assignments, start=first)), view.racks)
            if why is not None:
                refusals[t.name] = why
        order = [t.name for t in request.topics]

        def merge(answer: memoryview, version: int,
                  synthetic: Mapping[str, PartitionsResult]) -> bytes:
            response = parse_create_partitions_response(answer, version)
            return encode_create_partitions_response(version, header.correlation_id, replace(
                response, results=in_request_order(order, response.results, synthetic)))

        split = _Split(
            refused=lambda name, why: PartitionsResult(name, INVALID_REPLICA_ASSIGNMENT, why),
            answer=lambda results: encode_create_partitions_response(
                header.api_version, header.correlation_id, CreatePartitionsResponse(0, results)),
            without_refused=lambda: encode_create_partitions_request(frame, header, replace(
                request, topics=tuple(t for t in request.topics if t.name not in refusals))),
            merge=merge)
        return self._apply(client, CREATE_PARTITIONS, frame, header, order, refusals, checked,
                           split)
