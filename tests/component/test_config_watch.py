"""A mounted ConfigMap's change reaches the running proxy without a restart: the
settings file is watched, and a new content is applied as SIGHUP applies it."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from proxy.ops.config_watch import FileWatch
from proxy.settings import Settings, load_settings
from tests.component.conftest import free_port_block
from tests.component.test_enforcement_app import Rig


@pytest.fixture
async def rig() -> AsyncIterator[Rig]:
    r = Rig(free_port_block(60))
    yield r
    await r.close()


def configmap_swap(directory: Path, text: str, generation: int) -> None:
    """What the kubelet does: write a new timestamped directory, swap the ..data link."""
    target = directory / f"..{generation}"
    target.mkdir()
    (target / "rackguard.toml").write_text(text)
    link = directory / "..data_tmp"
    link.symlink_to(target.name)
    os.replace(link, directory / "..data")
    user_path = directory / "rackguard.toml"
    if not user_path.is_symlink():
        user_path.symlink_to("..data/rackguard.toml")


async def test_a_swapped_configmap_is_applied_without_a_restart(
    rig: Rig, tmp_path: Path
) -> None:
    cluster = await rig.start_cluster()
    configmap_swap(tmp_path, "min_insync_racks = 2\n", 1)
    path = tmp_path / "rackguard.toml"
    base: dict[str, Any] = {"upstream": cluster.bootstrap_servers,
                            "bootstrap_port": rig.base + 20, "broker_port_base": rig.base + 20,
                            "metadata_refresh_interval_ms": 60_000, "config_topic": "",
                            "config_watch_interval_ms": 50}
    app = rig.app(**base)
    await app.start()

    def load() -> Settings:
        return load_settings(base, config_file=path)

    app.watch_config(path, load)
    assert app.enforcer.settings.rule.default_min_racks == 2
    configmap_swap(tmp_path, "min_insync_racks = 1\n", 2)
    for _ in range(100):
        await asyncio.sleep(0.02)
        if app.enforcer.settings.rule.default_min_racks == 1:
            break
    assert app.enforcer.settings.rule.default_min_racks == 1
    # a content that does not load is refused; the rule in force stays
    configmap_swap(tmp_path, "min_insync_racks = 0\n", 3)
    await asyncio.sleep(0.3)
    assert app.enforcer.settings.rule.default_min_racks == 1


def test_the_watch_sees_content_not_times(tmp_path: Path) -> None:
    path = tmp_path / "f.toml"
    path.write_text("a = 1\n")
    watch = FileWatch(path)
    assert not watch.changed()
    path.write_text("a = 1\n")  # the same content, a new time
    assert not watch.changed()
    path.write_text("a = 2\n")
    assert watch.changed() and not watch.changed()  # once per change
    path.unlink()  # mid-swap: no change, and the next content that differs is one
    assert not watch.changed()
    path.write_text("a = 2\n")
    assert not watch.changed()
    path.write_text("a = 3\n")
    assert watch.changed()
