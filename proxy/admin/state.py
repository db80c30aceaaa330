"""The dynamic min.insync.racks values (set through the Admin API) as one frozen value,
and their records in the config topic.

Invariant: a :class:`DynamicConfigs` is never changed; :meth:`DynamicConfigs.apply`
returns a new one, so a reader holding one sees a consistent set. A record's key
names the resource (``topic:NAME`` or ``cluster-default``; a dimension's minimum,
``min.insync.racks.DIMENSION``, is ``dimension:DIMENSION/`` before it); its value is JSON
``{"value": N, "when": EPOCH_S, "client": "..."}``; a record without a value (a
tombstone) deletes. Records that are not of this shape are reported by
:func:`decode_record` as a ``RecordError`` and skipped by the caller.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

TOPIC = 2  # ConfigResource types, as on the wire
BROKER = 4
NAME = "min.insync.racks"
CLUSTER_DEFAULT_KEY = "cluster-default"
_TOPIC_PREFIX = "topic:"
_DIMENSION_PREFIX = "dimension:"


class RecordError(ValueError):
    """A config topic record rackguard cannot read (logged and counted, then skipped)."""


@dataclass(frozen=True, slots=True)
class Resource:
    """What a value applies to: one topic, or the cluster-wide default (topic None);
    ``dimension``: the minimum of that rack dimension (``min.insync.racks.DIMENSION``),
    None: min.insync.racks itself."""

    topic: str | None
    dimension: str | None = None

    @property
    def config(self) -> str:
        """The config's name, as the Admin API gives it."""
        return NAME if self.dimension is None else f"{NAME}.{self.dimension}"

    @property
    def key(self) -> str:
        base = CLUSTER_DEFAULT_KEY if self.topic is None else _TOPIC_PREFIX + self.topic
        return base if self.dimension is None else f"{_DIMENSION_PREFIX}{self.dimension}/{base}"

    @property
    def kind(self) -> str:
        """The ``resource_type`` label of the change counter."""
        return "cluster_default" if self.topic is None else "topic"

    def __str__(self) -> str:
        return "cluster default" if self.topic is None else f"topic {self.topic!r}"

    @staticmethod
    def from_key(key: str) -> Resource:
        if key.startswith(_DIMENSION_PREFIX):
            dimension, sep, rest = key[len(_DIMENSION_PREFIX):].partition("/")
            if not dimension or not sep or rest.startswith(_DIMENSION_PREFIX):
                raise RecordError(f"unknown resource key {key!r}")
            return Resource(Resource.from_key(rest).topic, dimension)
        if key == CLUSTER_DEFAULT_KEY:
            return CLUSTER_DEFAULT
        if key.startswith(_TOPIC_PREFIX) and len(key) > len(_TOPIC_PREFIX):
            return Resource(key[len(_TOPIC_PREFIX):])
        raise RecordError(f"unknown resource key {key!r}")


CLUSTER_DEFAULT = Resource(None)


@dataclass(frozen=True, slots=True)
class StoredValue:
    value: int
    when: float  # seconds since the epoch, when it was set
    client: str  # who set it: client id and address

    def encode(self) -> bytes:
        return json.dumps({"value": self.value, "when": self.when, "client": self.client},
                          sort_keys=True).encode()


@dataclass(frozen=True, slots=True)
class Change:
    """One change to apply: ``value`` None deletes (back to the next source)."""

    resource: Resource
    value: StoredValue | None
    deleted_by: str = ""  # who deleted it (a tombstone's ``client`` header)

    @property
    def client(self) -> str:
        return self.value.client if self.value is not None else self.deleted_by


def _empty() -> Mapping[str, StoredValue]:
    return MappingProxyType({})


def _empty_dims() -> Mapping[Resource, StoredValue]:
    return MappingProxyType({})


@dataclass(frozen=True, slots=True)
class DynamicConfigs:
    topics: Mapping[str, StoredValue] = field(default_factory=_empty)
    cluster_default: StoredValue | None = None
    # the minimums per rack dimension, by resource (its ``dimension`` set)
    dimensions: Mapping[Resource, StoredValue] = field(default_factory=_empty_dims)

    def get(self, resource: Resource) -> StoredValue | None:
        if resource.dimension is not None:
            return self.dimensions.get(resource)
        if resource.topic is None:
            return self.cluster_default
        return self.topics.get(resource.topic)

    def has_values(self, topic: str | None) -> bool:
        """Whether ``topic`` (None: the cluster default) has any dynamic value."""
        if (self.cluster_default is not None if topic is None else topic in self.topics):
            return True
        return any(r.topic == topic for r in self.dimensions)

    def apply(self, change: Change) -> DynamicConfigs:
        """A new value with ``change`` applied (this one is left as it is)."""
        resource = change.resource
        if resource.dimension is not None:
            dims = dict(self.dimensions)
            if change.value is None:
                dims.pop(resource, None)
            else:
                dims[resource] = change.value
            return DynamicConfigs(self.topics, self.cluster_default, MappingProxyType(dims))
        if resource.topic is None:
            return DynamicConfigs(self.topics, change.value, self.dimensions)
        topics = dict(self.topics)
        if change.value is None:
            topics.pop(resource.topic, None)
        else:
            topics[resource.topic] = change.value
        return DynamicConfigs(MappingProxyType(topics), self.cluster_default, self.dimensions)


def encode_record(change: Change) -> tuple[bytes, bytes | None]:
    """(key, value) of the config topic record for ``change``; value None: a tombstone."""
    return change.resource.key.encode(), None if change.value is None else change.value.encode()


CLIENT_HEADER = "client"


def decode_record(key: bytes | None, value: bytes | None, client: bytes = b"") -> Change:
    """The change a config topic record makes (``client``: its ``client`` header, which
    names who deleted for a tombstone); raises RecordError for a bad record."""
    if key is None:
        raise RecordError("record without a key")
    try:
        resource = Resource.from_key(key.decode())
    except UnicodeDecodeError as exc:
        raise RecordError("record key is not UTF-8") from exc
    if value is None:
        return Change(resource, None, client.decode("utf-8", "replace"))
    try:
        data = json.loads(value)
        number, when, client = data["value"], data["when"], data["client"]
    except (ValueError, TypeError, KeyError) as exc:
        raise RecordError(f"record for {resource} is not rackguard's JSON: {exc}") from exc
    if (not isinstance(number, int) or isinstance(number, bool) or number < 1
            or not isinstance(when, (int, float)) or not isinstance(client, str)):
        raise RecordError(f"record for {resource} has a bad value: {data!r}")
    return Change(resource, StoredValue(number, float(when), client))
