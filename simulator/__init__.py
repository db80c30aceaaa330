"""rackguard's multi-rack Kafka cluster simulator: a TEST DOUBLE, not a Kafka cluster.

It speaks enough of the Kafka protocol (via kafka-python's schema codec) for
clients to create topics, produce (idempotent too) and consume in groups against
N brokers in racks, with a controllable ISR and faults on demand, so the proxy's
own behaviour can be tested in seconds and ``rackguard demo`` can run. There is
one shared copy of each partition log: replication, durability, transactions,
reassignments, fetch sessions and quotas are not simulated. It proves what the
proxy sends, refuses and rewrites, never that data survives or how a client or
broker behaves: that is proven on real Kafka (tests/system).
"""

from simulator.cluster import SimulatedCluster, start_cluster
from simulator.config import BrokerSpec, SimulatorConfig, TopicSpec, racked_brokers
from simulator.log import StoredRecord
from simulator.state import StateError
from simulator.threaded import ThreadedCluster

__all__ = [
    "BrokerSpec",
    "SimulatedCluster",
    "SimulatorConfig",
    "StateError",
    "StoredRecord",
    "ThreadedCluster",
    "TopicSpec",
    "racked_brokers",
    "start_cluster",
]
