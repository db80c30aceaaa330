"""The settings table (docs/settings.md) and the example file (config/rackguard.example.toml)
list every setting; the flags are made from the model and keep their earlier names."""

from __future__ import annotations

from pathlib import Path

import pytest

from proxy.cli import SERVE_FLAGS, build_parser, settings_from_args
from proxy.settings import Settings, SettingsError, load_settings

ROOT = Path(__file__).resolve().parents[3]
README = (ROOT / "docs" / "settings.md").read_text()
EXAMPLE = ROOT / "config" / "rackguard.example.toml"


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


# Flag names as they were before the flags were made from the model: still accepted.
FLAGS_BEFORE = (
    "--upstream", "--listen", "--advertised-host", "--bootstrap-port", "--broker-port-base",
    "--min-insync-racks", "--topic-min-insync-racks", "--topic-prefix-min-insync-racks",
    "--error-mode", "--not-enough-racks-code", "--observe", "--max-metadata-age-ms",
    "--fail-open", "--broker-rack", "--broker-racks-override", "--metrics-port",
    "--metrics-partition-series", "--metadata-refresh-interval-ms", "--max-frame-size",
    "--admin-connect-timeout-ms", "--admin-request-timeout-ms", "--metadata-hedge-delay-ms",
    "--shutdown-timeout-ms", "--ledger-dir", "--ledger-rotate-bytes", "--ledger-rotate-seconds",
    "--ledger-queue-size", "--ledger-snapshot-interval-ms", "--instance-id", "--log-level",
    "--log-format",
)


def test_every_earlier_flag_is_kept() -> None:
    assert set(FLAGS_BEFORE) <= set(SERVE_FLAGS)


def test_flags_reach_the_settings() -> None:
    args = build_parser().parse_args([
        "serve", "--upstream", "a:1,b:2", "--listen", "0.0.0.0", "--advertised-host", "h",
        "--broker-rack", "1=r1", "--broker-rack", "2=r2", "--observe",
        "--write-high-water", "65536", "--error-mode", "dedicated"])
    s = settings_from_args(args)
    assert s.upstream == ("a:1", "b:2") and s.listen_host == "0.0.0.0"
    assert s.broker_racks == {1: "r1", 2: "r2"} and s.observe is True
    assert s.write_high_water == 65536 and s.error_mode == "dedicated"


def test_the_example_toml_names_every_setting_and_loads() -> None:
    text = EXAMPLE.read_text()
    named = {line.lstrip("# ").split(" ")[0] for line in text.splitlines()
             if " = " in line and not line.startswith("##")}
    assert set(Settings.model_fields) <= named, set(Settings.model_fields) - named
    assert named <= set(Settings.model_fields), named - set(Settings.model_fields)
    settings = load_settings(config_file=EXAMPLE, env={})
    assert settings.upstream == ("kafka-1:9092", "kafka-2:9092", "kafka-3:9092")
    assert settings.min_insync_racks == 2


def test_every_line_of_the_example_is_valid_when_uncommented(tmp_path: Path) -> None:
    lines = [line[2:] if line.startswith("# ") and " = " in line else line
             for line in EXAMPLE.read_text().splitlines()]
    every = tmp_path / "every.toml"
    every.write_text("\n".join(lines))
    settings = load_settings(config_file=every, env={})
    assert settings.ledger_dir is not None and settings.topic_min_insync_racks == {"payments": 3}


def test_the_earlier_shutdown_flag_sets_the_drain_timeout() -> None:
    args = build_parser().parse_args(["serve", "--upstream", "a:1",
                                      "--shutdown-timeout-ms", "2500"])
    assert settings_from_args(args).drain_timeout_ms == 2500


def test_the_earlier_name_in_a_toml_file_sets_the_drain_timeout(tmp_path: Path) -> None:
    path = tmp_path / "old.toml"
    path.write_text('upstream = ["a:1"]\nshutdown_timeout_ms = 3000\n')
    assert load_settings(config_file=path, env={}).drain_timeout_ms == 3000
    path.write_text('upstream = ["a:1"]\nshutdown_timeout_ms = 3000\ndrain_timeout_ms = 4000\n')
    assert load_settings(config_file=path, env={}).drain_timeout_ms == 4000
    with pytest.raises(SettingsError, match="renamed RACKGUARD_DRAIN_TIMEOUT_MS"):
        load_settings(env={"RACKGUARD_SHUTDOWN_TIMEOUT_MS": "3000"})
