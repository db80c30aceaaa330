"""What rack hints may change, and how a fetch's bytes are classed: pure functions.

Subscriptions (KIP-881). Every mainstream reader of ConsumerProtocolSubscription (the
Java consumer's ConsumerCoordinator, librdkafka, kafka-python, Sarama, franz-go)
decodes the envelope itself, whatever the assignor, and reads a newer version with the
fields it knows (the schema promises that versions only append). So:

- a v3 subscription without a rack gets ``client_rack`` for any assignor: its client
  wrote v3, so every reader of it reads v3;
- a v0-v2 subscription is raised to v3 only for the built-in assignors whose names
  every client above uses the same way (``range``, ``roundrobin``, ``sticky``,
  ``cooperative-sticky``): an unknown name may belong to an assignor that reads the
  raw metadata with a version check of its own, so it is left as it came;
- Kafka Streams (protocol ``stream``) is left alone whole: its rack-aware task
  assignment (KIP-925) reads racks its own way, and its subscription is not ours to
  change.

Locality of fetched bytes: the rack of the broker that served them (the broker behind
the listener the fetch arrived on) against ``client_rack``; a fetch through the
bootstrap listener, or from a broker whose rack is not known, is ``unknown``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

BUILT_IN_ASSIGNORS = frozenset({"range", "roundrobin", "sticky", "cooperative-sticky"})
LEFT_ALONE = frozenset({"stream"})

Locality = Literal["same_rack", "cross_rack", "unknown"]
LOCALITIES: tuple[Locality, ...] = ("same_rack", "cross_rack", "unknown")


def subscription_choice(protocol_name: str) -> bool | None:
    """None: leave this protocol's metadata alone; False: fill the rack of a v3
    subscription only; True: also raise a v0-v2 subscription to v3 to carry it."""
    if protocol_name in LEFT_ALONE:
        return None
    return protocol_name in BUILT_IN_ASSIGNORS


def listener_node(listener: str) -> int | None:
    """The broker a listener stands for ("node-<id>"), None for the bootstrap one."""
    if not listener.startswith("node-"):
        return None
    try:
        return int(listener[5:])
    except ValueError:
        return None


def locality(client_rack: str, serving_rack: str | None) -> Locality:
    if not serving_rack:
        return "unknown"
    return "same_rack" if serving_rack == client_rack else "cross_rack"


def redirect_possible(client_rack: str, racks: Mapping[int, str | None], node: int | None
                      ) -> bool:
    """Whether a broker can answer a fetch that carries ``client_rack`` with a preferred
    read replica (KIP-392's RackAwareReplicaSelector names a replica in the client's
    rack other than the leader): only when some broker is in that rack and the serving
    one (``node``; None: behind the bootstrap listener, not known) is not."""
    if node is not None and racks.get(node) == client_rack:
        return False
    return client_rack in racks.values()
