"""rackguard's settings: one pydantic-settings model, four sources.

The model (:mod:`.model`) joins one group of fields per concern: the relay
(:mod:`.relay`), the rule (:mod:`.rule`), rack locality (:mod:`.locality`), operations
(:mod:`.ops`), security (:mod:`.security`) and the Kafka Streams audit
(:mod:`.streams`); :mod:`.values` holds the parsers their
validators share. Precedence: CLI flags over ``RACKGUARD_*`` environment variables over
the TOML file named by ``--config`` over the defaults.
"""

from proxy.settings.model import Settings, load_settings
from proxy.settings.values import (
    ENV_PREFIX,
    KAFKA_MAX_ASSIGNED_ERROR_CODE,
    MAX_PORT,
    SettingsError,
    parse_host_port,
)

__all__ = ["ENV_PREFIX", "KAFKA_MAX_ASSIGNED_ERROR_CODE", "MAX_PORT", "Settings",
           "SettingsError", "load_settings", "parse_host_port"]
