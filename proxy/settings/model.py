"""The whole settings model: the groups of fields joined into one pydantic-settings
class, the checks across groups, and the sources it is read from.

Invariant: precedence is CLI flags over ``RACKGUARD_*`` environment variables over the
TOML file named by ``--config`` over the defaults; a ``Settings`` object is immutable
once built, and every value in it has been validated (an invalid one raises
:class:`SettingsError` with one line naming the setting). The fields are declared in
their groups' modules; their order (flags, docs/settings.md) is the order of the
groups below, last base first, as pydantic collects them.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import MappingProxyType
from typing import Any, Self

from pydantic import ValidationError, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from proxy.settings.dimensions import DimensionFields
from proxy.settings.locality import LocalityFields
from proxy.settings.losswatch import LossWatchFields
from proxy.settings.ops import OpsFields
from proxy.settings.relay import RelayFields
from proxy.settings.rule import RuleFields
from proxy.settings.security import SecurityFields
from proxy.settings.streams import StreamsFields
from proxy.settings.values import ENV_PREFIX, SettingsError

# Settings renamed: their earlier names are still read from a TOML file (the new name
# wins when both are given); in the environment the earlier name is refused, naming the new.
RENAMED = {"shutdown_timeout_ms": "drain_timeout_ms"}


class Settings(LossWatchFields, StreamsFields, SecurityFields, OpsFields, LocalityFields,
               DimensionFields, RuleFields, RelayFields, BaseSettings):
    """Every setting of rackguard. Field descriptions are docs/settings.md's table."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, frozen=True, extra="forbid", populate_by_name=True
    )

    @model_validator(mode="before")
    @classmethod
    def _earlier_names(cls, data: Any) -> Any:
        if isinstance(data, dict) and any(old in data for old in RENAMED):
            data = dict(data)
            for old, new in RENAMED.items():
                if old in data:
                    value = data.pop(old)
                    data.setdefault(new, value)
        return data

    @model_validator(mode="after")
    def _failover_fits_the_age_bound(self) -> Self:
        # a poll must be able to give up on two brokers and still refresh in time
        attempt = self.admin_connect_timeout_ms + self.admin_request_timeout_ms
        if 2 * attempt > self.max_metadata_age_ms:
            raise ValueError(
                f"admin_connect_timeout_ms + admin_request_timeout_ms ({attempt} ms): two "
                f"failed attempts must fit in max_metadata_age_ms "
                f"({self.max_metadata_age_ms} ms)"
            )
        if self.metadata_hedge_delay_ms >= self.admin_request_timeout_ms:
            raise ValueError(
                f"metadata_hedge_delay_ms ({self.metadata_hedge_delay_ms}) must be below "
                f"admin_request_timeout_ms ({self.admin_request_timeout_ms})"
            )
        if self.upstream_backoff_max_ms < self.upstream_backoff_ms:
            raise ValueError("upstream_backoff_max_ms must be at least upstream_backoff_ms")
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        toml_path = _TOML_PATH.get("path")
        if toml_path is not None:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=toml_path))
        return tuple(sources)


# The TOML path is chosen per load; pydantic-settings builds sources from the
# class, so load_settings passes it through this one-slot holder.
_TOML_PATH: dict[str, Path | None] = {"path": None}


def load_settings(
    overrides: dict[str, Any] | None = None,
    config_file: str | Path | None = None,
    env: dict[str, str] | None = None,
) -> Settings:
    """Build Settings from CLI overrides, the environment and an optional TOML file.

    ``env`` replaces ``os.environ`` as the environment source (for tests).
    """
    path = Path(config_file) if config_file is not None else None
    if path is not None and not path.is_file():
        raise SettingsError(f"config: file {str(path)!r} does not exist")
    # A dict given here must replace, not be merged into, a table from the TOML file
    # (pydantic-settings deep-merges dict values across sources); a read-only mapping
    # is not a dict to that merge but validates the same.
    clean: dict[str, Any] = {
        k: MappingProxyType(v) if isinstance(v, dict) else v
        for k, v in (overrides or {}).items()
        if v is not None
    }
    environment = os.environ if env is None else env
    unknown = sorted(
        key for key in environment
        if key.startswith(ENV_PREFIX) and key[len(ENV_PREFIX):].lower() not in Settings.model_fields
    )
    if unknown:
        earlier = unknown[0][len(ENV_PREFIX):].lower()
        if earlier in RENAMED:
            raise SettingsError(f"invalid setting {unknown[0]}: renamed "
                                f"{ENV_PREFIX}{RENAMED[earlier].upper()}")
        raise SettingsError(f"invalid setting {unknown[0]}: no such setting (a typo?)")
    _TOML_PATH["path"] = path
    try:
        if env is not None:
            return _with_env(env, clean)
        return Settings(**clean)
    except ValidationError as exc:
        raise SettingsError(_one_line(exc)) from None
    except ValueError as exc:  # TOML syntax errors and the like
        raise SettingsError(f"config: {exc}") from None
    finally:
        _TOML_PATH["path"] = None


def _with_env(env: dict[str, str], overrides: dict[str, Any]) -> Settings:
    saved = dict(os.environ)
    try:
        os.environ.clear()
        os.environ.update(env)
        return Settings(**overrides)
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _one_line(exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err.get("loc", ()))
    msg = str(err.get("msg", "invalid value")).removeprefix("Value error, ")
    if not loc:  # a model-level check names its setting itself
        return f"invalid setting {msg}"
    if err.get("type") == "value_error":
        return f"invalid setting {loc}: {msg}"
    return f"invalid setting {loc}: {msg} (got {err.get('input')!r})"
