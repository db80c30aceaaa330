"""Request hooks that feed the watched set from the requests that pass through.

A Fetch, a Metadata request naming topics, and the admin requests naming topics (CreateTopics,
CreatePartitions, DescribeConfigs, AlterConfigs, IncrementalAlterConfigs on topic
resources), make their topics join the :class:`~proxy.cluster.watch.WatchedTopics`
before they go upstream, so the answer to a client's named Metadata request (which
feeds the view) lands on a watched topic. Produce requests join through the rack
enforcer, which walks them anyway. A Metadata request for every topic joins nothing.

Invariant: a watch hook never changes what happens to the request: it forwards the
client's bytes as they are, to the hook installed before it if any (with
:func:`~proxy.relay.hook_chain.chain`, at no extra cost), else with the response
rewriter the relay keeps for that API; a request it cannot read is forwarded
unread (the broker, or the next hook, judges it), never refused.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from protocol.alter_configs import (
    ALTER_CONFIGS,
    INCREMENTAL_ALTER_CONFIGS,
    parse_alter_configs_request,
)
from protocol.apis import ApiKey
from protocol.create_partitions import API_KEY as CREATE_PARTITIONS
from protocol.create_partitions import parse_create_partitions_request
from protocol.create_topics import API_KEY as CREATE_TOPICS
from protocol.create_topics import parse_create_topics_request
from protocol.describe_configs_rewrite import parse_describe_configs_request
from protocol.fetch_topics import read_fetch_topics
from protocol.headers import RequestHeader, parse_request_header
from protocol.metadata_request import read_metadata_request_topics
from protocol.primitives import ProtocolError
from proxy.cluster.watch import WatchedTopics
from proxy.relay.actions import Action, ClientInfo, Forward, RequestHook
from proxy.relay.hook_chain import chain
from proxy.relay.response_queue import ResponseTransform

TOPIC_RESOURCE = 2  # ConfigResource type TOPIC
TopicReader = Callable[[memoryview, RequestHeader], Sequence[str | bytes] | None]


def _metadata(frame: memoryview, header: RequestHeader) -> Sequence[str | bytes] | None:
    return read_metadata_request_topics(frame, header)


def _create_topics(frame: memoryview, header: RequestHeader) -> Sequence[str]:
    return [t.name for t in parse_create_topics_request(frame, header).topics]


def _create_partitions(frame: memoryview, header: RequestHeader) -> Sequence[str]:
    return [t.name for t in parse_create_partitions_request(frame, header).topics]


def _describe_configs(frame: memoryview, header: RequestHeader) -> Sequence[str]:
    return [r.resource_name for r in parse_describe_configs_request(frame, header).resources
            if r.resource_type == TOPIC_RESOURCE]


def _alter_configs(frame: memoryview, header: RequestHeader) -> Sequence[str]:
    return [r.resource_name for r in parse_alter_configs_request(frame, header).resources
            if r.resource_type == TOPIC_RESOURCE]


READERS: Mapping[int, TopicReader] = {
    ApiKey.FETCH: read_fetch_topics,
    ApiKey.METADATA: _metadata,
    CREATE_TOPICS: _create_topics,
    CREATE_PARTITIONS: _create_partitions,
    ApiKey.DESCRIBE_CONFIGS: _describe_configs,
    ALTER_CONFIGS: _alter_configs,
    INCREMENTAL_ALTER_CONFIGS: _alter_configs,
}


class WatchHook:
    """Join the topics a request names, then forward it unchanged."""

    def __init__(self, watched: WatchedTopics, read: TopicReader,
                 transform: ResponseTransform | None) -> None:
        self._watched = watched
        self._read = read
        self._transform = transform

    def __call__(self, client: ClientInfo, frame: memoryview, api_key: int, api_version: int,
                 corr: int) -> Action:
        try:
            topics = self._read(frame, parse_request_header(frame))
        except ProtocolError:
            topics = None  # forwarded unread: what reads it next judges it
        if topics:
            self._watched.use(topics)
        return Forward(frame, True, self._transform)


def watch_hooks(watched: WatchedTopics, installed: Callable[[int], RequestHook | None],
                rewriters: Mapping[int, ResponseTransform],
                readers: Mapping[int, TopicReader] = READERS) -> dict[int, RequestHook]:
    """The hook of each API in ``readers``: the watch hook before the one ``installed``
    gives (chained), or alone with the relay's response rewriter of that API."""
    hooks: dict[int, RequestHook] = {}
    for api_key, read in readers.items():
        earlier = installed(api_key)
        if earlier is None:
            hooks[api_key] = WatchHook(watched, read, rewriters.get(api_key))
        else:
            hooks[api_key] = chain(WatchHook(watched, read, None), earlier)
    return hooks

