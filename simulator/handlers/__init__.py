"""Request handlers of the simulator (a TEST DOUBLE), one module per API family.

Invariant: HANDLERS has exactly the API keys of simulator.versions.SUPPORTED.
"""

from __future__ import annotations

from simulator.handlers import (
    admin,
    fetch,
    group_apis,
    meta,
    partitions,
    produce,
    sasl_apis,
)
from simulator.handlers.base import Ctx, Handler
from simulator.versions import SUPPORTED

HANDLERS: dict[int, Handler] = {
    0: produce.produce,
    1: fetch.fetch,
    2: fetch.list_offsets,
    3: meta.metadata,
    8: group_apis.offset_commit,
    9: group_apis.offset_fetch,
    10: meta.find_coordinator,
    11: group_apis.join_group,
    12: group_apis.heartbeat,
    13: group_apis.leave_group,
    14: group_apis.sync_group,
    17: sasl_apis.sasl_handshake,
    18: meta.api_versions,
    19: admin.create_topics,
    22: produce.init_producer_id,
    32: admin.describe_configs,
    33: admin.alter_configs,
    36: sasl_apis.sasl_authenticate,
    37: partitions.create_partitions,
    44: admin.incremental_alter_configs,
    60: meta.describe_cluster,
}

assert set(HANDLERS) == set(SUPPORTED), set(HANDLERS) ^ set(SUPPORTED)

__all__ = ["HANDLERS", "Ctx", "Handler"]
