"""Where the chart checks' tools come from: a machine without Go gets a reason to skip,
not a failure; a built helm is found in the cache without building again."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.deploy import tools


def test_without_go_the_helm_checks_skip_with_the_reason(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(tools, "cache", lambda: tmp_path)
    monkeypatch.setattr(tools, "find_go", lambda: None)
    reason = tools.helm()
    assert isinstance(reason, str) and reason.startswith("no Go toolchain")


def test_a_cached_helm_is_used_as_it_is(monkeypatch: pytest.MonkeyPatch, tmp_path: Path
                                        ) -> None:
    binary = tmp_path / "helm" / tools.HELM_VERSION / "helm"
    binary.parent.mkdir(parents=True)
    binary.write_text("")
    monkeypatch.setattr(tools, "cache", lambda: tmp_path)
    monkeypatch.setattr(tools, "find_go", lambda: pytest.fail("no build expected"))
    assert tools.helm() == binary
