"""Where a tool the production image leaves out (the simulator and the demo built on it,
the PySpark reports) is asked for, ``rackguard`` says so in one line and exits 2; a
module missing for any other reason is not hidden behind that message."""

from __future__ import annotations

import sys

import pytest

from proxy import cli


@pytest.mark.parametrize(("argv", "left_out"), [
    (["demo"], "proxy.tools.demo"),
    (["demo"], "simulator"),
    (["simulate", "--help"], "simulator"),
    (["report", "durability"], "pipeline"),
])
def test_a_tool_left_out_of_the_image_gets_one_clear_line(
        argv: list[str], left_out: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    for name in [m for m in sys.modules if m == left_out or m.startswith(left_out + ".")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, left_out, None)  # import raises ModuleNotFoundError
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith(f"rackguard {argv[0]}: not installed here ({left_out}"), err[0]
    assert "the production image holds the proxy alone" in err[0]
    if argv[0] == "demo":
        assert ".venv/bin/pip install -e . && .venv/bin/rackguard demo" in err[0]


def test_another_missing_module_is_not_hidden(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "_main", lambda argv: __import__("no_such_module_here"))
    with pytest.raises(ModuleNotFoundError, match="no_such_module_here"):
        cli.main(["demo"])
