"""proxy.cluster.watch_hooks: requests that name topics make them join, and go on as
they came (to the hook installed before, or with the relay's rewriter); a request the
watch cannot read is forwarded unread, never refused."""

from __future__ import annotations

from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import MetadataRequest

from protocol.apis import ApiKey
from proxy.cluster.watch import WatchedTopics
from proxy.cluster.watch_hooks import watch_hooks
from proxy.relay.actions import Action, ClientInfo, Forward

CLIENT = ClientInfo("127.0.0.1:1", "bootstrap")


def encode(request: object) -> memoryview:
    request.with_header(correlation_id=3, client_id="c")  # type: ignore[attr-defined]
    return memoryview(bytes(request.encode(header=True, framed=True)))  # type: ignore[attr-defined]


def rewrite(frame: memoryview, version: int) -> object:
    return frame


def earlier(client: ClientInfo, frame: memoryview, api_key: int, api_version: int,
            corr: int) -> Action:
    return Forward(b"from the earlier hook", True, None)


def hooks(watched: WatchedTopics) -> dict[int, object]:
    installed = {19: earlier}  # CreateTopics already has a hook (the creation guard)
    return watch_hooks(watched, installed.get, {ApiKey.METADATA: rewrite})  # type: ignore[return-value]


def call(hook: object, frame: memoryview, api_key: int, version: int) -> Action:
    return hook(CLIENT, frame, api_key, version, 3)  # type: ignore[operator, no-any-return]


def test_named_topics_join_and_the_request_goes_on_unchanged() -> None:
    watched = WatchedTopics(lambda: 0.0, 60)
    table = hooks(watched)
    frame = encode(MetadataRequest(version=12, topics=[
        MetadataRequest.MetadataRequestTopic(topic_id=None, name="orders")]))
    action = call(table[ApiKey.METADATA], frame, 3, 12)
    assert isinstance(action, Forward) and action.frame is frame
    assert action.transform is rewrite  # the relay's Metadata rewriter still runs
    assert watched.names() == {"orders"}

    everything = encode(MetadataRequest(version=12, topics=None))
    call(table[ApiKey.METADATA], everything, 3, 12)
    assert watched.names() == {"orders"}  # every topic: nothing joins

    fetch = encode(FetchRequest(version=11, replica_id=-1, max_wait_ms=500, min_bytes=1,
                                max_bytes=1 << 20, isolation_level=0, session_id=0,
                                session_epoch=-1, topics=[FetchRequest.FetchTopic(
                                    topic="events", partitions=[])],
                                forgotten_topics_data=[], rack_id=""))
    call(table[ApiKey.FETCH], fetch, 1, 11)
    assert watched.names() == {"orders", "events"}


def test_a_hook_installed_before_still_decides() -> None:
    watched = WatchedTopics(lambda: 0.0, 60)
    frame = encode(CreateTopicsRequest(version=4, topics=[CreateTopicsRequest.CreatableTopic(
        name="new", num_partitions=1, replication_factor=3, assignments=[], configs=[])],
        timeout_ms=1000, validate_only=False))
    action = call(hooks(watched)[19], frame, 19, 4)
    assert isinstance(action, Forward) and action.frame == b"from the earlier hook"
    assert watched.names() == {"new"}


def test_a_request_the_watch_cannot_read_is_forwarded_unread() -> None:
    watched = WatchedTopics(lambda: 0.0, 60)
    frame = encode(MetadataRequest(version=12, topics=[
        MetadataRequest.MetadataRequestTopic(topic_id=None, name="orders")]))
    cut = memoryview(bytes(frame[:-6]))
    action = call(hooks(watched)[ApiKey.METADATA], cut, 3, 12)
    assert isinstance(action, Forward) and action.frame is cut
    assert watched.names() == frozenset()
