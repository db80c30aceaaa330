"""The four reports as a person sees them: a realistic ledger, a real headless browser.

Over tests/pipeline/sample_ledger.py (ten minutes, a lost zone): each report's
verdict states the ledger's known figures; each page renders in headless
Chromium with no console message, and its first screen is a real picture (a
screenshot of the expected size, not blank). The screenshots are kept in
``test-artifacts/reports/`` (``RGTEST_ARTIFACTS`` moves it) for people to
look at; the docs' are made the same way.

Skips with the reason where Chromium is missing (.ci/run installs Debian's
chromium-headless-shell).
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
from pathlib import Path
from typing import Any

import pytest

from pipeline.jobs import run
from pipeline.labels import human_bytes

from . import sample_ledger

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("RGTEST_ARTIFACTS", REPO / "test-artifacts")) / "reports"
WIDTH, HEIGHT = 1280, 1000
BROWSERS = ("chromium-headless-shell", "chromium", "google-chrome", "chrome")


def browser() -> str | None:
    given = os.environ.get("RGTEST_CHROMIUM")
    if given:
        return given
    return next((found for name in BROWSERS if (found := shutil.which(name))), None)


def screenshot(page: Path, png: Path) -> list[str]:
    """Opens ``page`` headless, writes its first screen to ``png``; returns the console
    messages Chromium logged."""
    exe = browser()
    assert exe is not None
    done = subprocess.run(
        [exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         f"--window-size={WIDTH},{HEIGHT}", "--enable-logging=stderr", "--v=0",
         f"--screenshot={png}", page.as_uri()],
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return [line for line in done.stderr.splitlines() if ":CONSOLE" in line]


def png_size(png: Path) -> tuple[int, int]:
    head = png.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", head[16:24])
    return width, height


@pytest.fixture(scope="module")
def pages(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, int]]:
    root = tmp_path_factory.mktemp("sample")
    figures = sample_ledger.write(root / "ledger")
    ledger = str(root / "ledger")
    for name, extra in (("durability", []), ("whatif", []), ("placement", []),
                        ("audit-loss", ["--offsets", str(root / "offsets.jsonl")])):
        assert run([name, "--ledger", ledger, "--out", str(root / name), *extra],
                   spark=spark) == 0
    return root, figures


def verdict(root: Path, name: str) -> str:
    page = (root / name / "report.html").read_text()
    return page[page.index("id='verdict'"):page.index("</section>")]


def test_verdicts_state_the_ledgers_figures(pages: tuple[Path, dict[str, int]]) -> None:
    root, f = pages
    durability = verdict(root, "durability")
    under_bytes = f["under_records"] // sample_ledger.RECORDS * sample_ledger.BYTES
    assert (f"{human_bytes(under_bytes)}, {f['under_records']:,} records) were acknowledged "
            "while their in-sync replicas spanned fewer than 2 racks, on 1 topic (drill), for "
            "60 s (between 00:34:00 and 00:34:59 UTC)") in durability
    assert "If rack-a had been lost in that window they were gone." in durability
    assert f"The proxy refused {f['refused']} partition writes (NOT_ENOUGH_RACKS: " in durability
    lost = verdict(root, "audit-loss")
    assert (f"{f['lost_records']} acknowledged records are missing from the cluster: topic "
            "drill, partition 0, offsets 2400-2999, acknowledged between 00:34:00 and "
            "00:34:59 UTC while the ISR spanned rack-a only.") in lost
    assert "min.insync.racks=2 would have refused 360 of 10,080" in verdict(root, "whatif")
    assert "Every partition (9) has replicas on at least 2 racks." in verdict(root, "placement")


@pytest.mark.parametrize("name", ["durability", "whatif", "placement", "audit-loss"])
def test_page_renders_in_a_browser(pages: tuple[Path, dict[str, int]], name: str) -> None:
    if browser() is None:
        pytest.skip("no headless Chromium (apt-get install chromium-headless-shell, or set "
                    "RGTEST_CHROMIUM)")
    root, _ = pages
    png = root / f"{name}.png"
    console = screenshot(root / name / "report.html", png)
    assert console == []
    assert png_size(png) == (WIDTH, HEIGHT)
    from matplotlib.image import imread

    pixels = imread(str(png))
    assert pixels.std() > 0.05, "the screenshot is blank"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shutil.copy(png, ARTIFACTS / png.name)
