"""The settings' constants and the parsers their validators share.

Invariant: pure functions over strings; every error is a ``ValueError`` whose message
names what was expected (pydantic turns it into one line naming the setting).
"""

from __future__ import annotations

from typing import Any

MAX_PORT = 65535
ENV_PREFIX = "RACKGUARD_"
KAFKA_MAX_ASSIGNED_ERROR_CODE = 133  # the highest error code Kafka assigns today


class SettingsError(ValueError):
    """An invalid setting; the message is one line naming it."""


def parse_host_port(value: str) -> tuple[str, int]:
    host, sep, port = value.strip().rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"expected HOST:PORT, got {value!r}")
    number = int(port)
    if not 0 < number <= MAX_PORT:
        raise ValueError(f"port out of range in {value!r}")
    return host.strip("[]"), number


def parse_pairs(value: Any) -> Any:
    """'a=1,b=2' or ['a=1', 'b=2'] -> {'a': '1', 'b': '2'}; dicts pass through."""
    if isinstance(value, str):
        value = [part for part in value.split(",") if part.strip()]
    if isinstance(value, (list, tuple)):
        out = {}
        for item in value:
            key, sep, val = str(item).partition("=")
            if not sep or not key.strip() or not val.strip():
                raise ValueError(f"expected KEY=VALUE, got {item!r}")
            out[key.strip()] = val.strip()
        return out
    return value


def split_csv(value: Any) -> Any:
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    return value
