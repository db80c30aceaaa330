"""The settings table (docs/settings.md) lists every setting, with its env var and flag."""

from __future__ import annotations

from pathlib import Path

from rackguard.proxy.cli import SERVE_FLAGS
from rackguard.proxy.settings import Settings

README = (Path(__file__).resolve().parents[2] / "docs" / "settings.md").read_text()


def _rows() -> dict[str, str]:
    rows = {}
    for line in README.splitlines():
        if line.startswith("| `"):
            name = line.split("`")[1]
            rows[name] = line
    return rows


def test_every_setting_has_a_row_with_env_and_flag() -> None:
    rows = _rows()
    flags = {field: flag for flag, (field, _) in SERVE_FLAGS.items()}
    for name in Settings.model_fields:
        assert name in rows, f"docs/settings.md lacks {name}"
        assert f"`RACKGUARD_{name.upper()}`" in rows[name]
        if name in flags:
            assert f"`{flags[name]}`" in rows[name], f"docs/settings.md lacks the flag of {name}"


def test_the_table_names_no_setting_that_does_not_exist() -> None:
    table = {n for n, line in _rows().items() if "`RACKGUARD_" in line}
    assert table <= set(Settings.model_fields)
