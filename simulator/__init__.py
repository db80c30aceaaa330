"""rackguard's multi-rack Kafka cluster simulator: a TEST DOUBLE, not a Kafka cluster.

It speaks enough of the Kafka protocol (via kafka-python's schema codec) for
real clients to create topics, produce, consume in groups and run
idempotent/transactional producers against N brokers in racks, with a
controllable ISR, so rackguard's min.insync.racks enforcement can be tested.
There is one shared copy of each partition log: replication, durability,
fetch sessions and quotas are not simulated.
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
