"""Imports run one way.

- ``rackguard serve`` loads no tool: not the benchmarks, the demo, the simulator, the
  pipeline or pyspark (checked in a fresh interpreter, as the command runs);
- the pipeline imports nothing of the proxy but the ledger's schema module (and of the
  protocol only the reader of Produce answers, which the ledger keeps as bytes);
- the proxy imports the pipeline only in its ``report`` command and the simulator only in
  its tools (``demo``, ``simulate``), never on the serving path;
- the benchmarks import nothing of the tests; the product (protocol, proxy) imports
  neither tests nor benchmarks; protocol imports nothing of the proxy and never asyncio;
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ("proxy.tools", "simulator", "pipeline",
         "proxy.placement.command", "proxy.placement.live", "proxy.placement.config_topic",
         "proxy.placement.sources", "proxy.placement.render",
         "proxy.streams.command", "proxy.streams.live", "proxy.streams.render")

SERVE = f"""
import sys
from proxy import cli
args = cli.build_parser().parse_args(["serve", "--upstream", "127.0.0.1:1"])
cli.settings_from_args(args)
import proxy.app
tools = ("pyspark", "benchmarks", "tests", "matplotlib")
print(sorted(m for m in sys.modules if m.split(".")[0] in tools
             or m.startswith({TOOLS!r})))
"""


def imported(folder: str) -> dict[str, set[str]]:
    """Module path -> the absolute module names it imports anywhere (functions too)."""
    out: dict[str, set[str]] = {}
    for path in (ROOT / folder).rglob("*.py"):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module)
        out[str(path.relative_to(ROOT))] = names
    return out


def under(names: set[str], *prefixes: str) -> set[str]:
    return {n for n in names if any(n == p or n.startswith(p + ".") for p in prefixes)}


def test_serve_loads_no_tool() -> None:
    done = subprocess.run([sys.executable, "-c", SERVE], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_pipeline_imports_only_the_ledger_schema_of_the_proxy() -> None:
    ties = {n for names in imported("pipeline").values() for n in under(names, "proxy")}
    assert ties == {"proxy.ledger.schema"}
    # the broker's answers are read with the protocol's sans-IO reader, nothing more
    codecs = {n for names in imported("pipeline").values() for n in under(names, "protocol")}
    assert codecs == {"protocol.produce_results", "protocol.primitives"}


def test_the_proxy_imports_tools_only_in_its_tool_commands() -> None:
    for path, names in imported("proxy").items():
        if path.startswith("proxy/tools/"):
            continue
        pipeline = under(names, "pipeline")
        simulator = under(names, "simulator")
        assert not pipeline and not simulator or path == "proxy/cli.py", path
    cli = imported("proxy")["proxy/cli.py"]
    assert not under(cli, "pipeline")  # the report command goes through tools/


def test_protocol_is_sans_io_and_knows_no_proxy() -> None:
    for path, names in imported("protocol").items():
        assert not under(names, "asyncio", "proxy", "socket"), path


def test_benchmarks_and_the_product_do_not_import_tests() -> None:
    for folder, banned in (("benchmarks", ("tests",)), ("protocol", ("tests", "benchmarks")),
                           ("proxy", ("tests", "benchmarks")),
                           ("pipeline", ("tests", "benchmarks"))):
        for path, names in imported(folder).items():
            assert not under(names, *banned), path

