"""kcat (librdkafka CLI) helpers and a compatibility probe.

kcat 1.7.1 (Debian 12, built-in librdkafka 2.0.2) cannot parse Tansu 0.6.0's
ApiVersions v3 response: the reply ends with four tagged fields
(SupportedFeatures, FinalizedFeaturesEpoch, FinalizedFeatures,
ZkMigrationReady) and librdkafka 2.0.2 fails with "Protocol read buffer
underflow for ApiVersion v3 at 274/279". ``api.version.request=false`` on its
own is not enough (broker.version.fallback >= 0.10 turns the ApiVersion
feature back on); with ``broker.version.fallback=0.9.0`` metadata (-L) works
but produce/consume then use MessageSet v0 and ListOffsets v0, which Tansu
does not serve correctly. :func:`probe` finds out what works on this machine.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass, field

KCAT = shutil.which("kcat") or shutil.which("kafkacat")

VARIANTS: dict[str, list[str]] = {
    "default": [],
    "no-apiversions": ["-X", "api.version.request=false", "-X", "broker.version.fallback=0.9.0"],
}


@dataclass
class KcatRun:
    argv: list[str]
    returncode: int | None
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def __str__(self) -> str:
        return (
            f"$ {' '.join(self.argv)}\nrc={self.returncode}\n--- stdout ---\n"
            f"{self.stdout[-2000:]}\n--- stderr ---\n{self.stderr[-3000:]}"
        )

    def first_error(self) -> str:
        """The first failure line, without librdkafka's log prefix."""
        for line in self.stderr.splitlines():
            if "ERROR" in line or "underflow" in line.lower() or "FAIL" in line:
                line = line.split("]: ", 1)[-1]
                return re.sub(r"^\S+/(bootstrap|\d+): ", "", line).strip()
        return (self.stderr.strip().splitlines() or [f"rc={self.returncode}"])[-1]


def version() -> str:
    """E.g. "kcat 1.7.1 (librdkafka 2.0.2)"."""
    if KCAT is None:
        return "kcat (not installed)"
    r = subprocess.run([KCAT, "-V"], capture_output=True, text=True, timeout=10)
    m = re.search(r"Version (\S+) .*?(librdkafka \S+)", r.stdout)
    return f"kcat {m[1]} ({m[2]})" if m else "kcat " + r.stdout.strip()


def run(
    bootstrap: str,
    args: list[str],
    variant: str = "default",
    input: str | None = None,
    timeout: float = 15,
) -> KcatRun:
    assert KCAT is not None
    argv = [KCAT, "-b", bootstrap, *VARIANTS[variant], *args]
    try:
        r = subprocess.run(argv, input=input, capture_output=True, text=True, timeout=timeout)
        return KcatRun(argv, r.returncode, r.stdout, r.stderr)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        return KcatRun(argv, None, out, err + f"\n<timed out after {timeout}s>")


def metadata(
    bootstrap: str, variant: str = "default", timeout: float = 10
) -> tuple[dict | None, KcatRun]:
    r = run(bootstrap, ["-L", "-J", "-m", "3"], variant, timeout=timeout)
    md = None
    if r.ok:
        try:
            md = json.loads(r.stdout)
        except json.JSONDecodeError:
            md = None
    return md, r


@dataclass
class KcatProbe:
    """Which variants can read metadata straight from Tansu."""

    version: str
    runs: dict[str, KcatRun] = field(default_factory=dict)

    def works(self, variant: str) -> bool:
        return variant in self.runs and self.runs[variant].ok

    def metadata_variant(self) -> str | None:
        return next((v for v in VARIANTS if self.works(v)), None)

    def reason(self, variant: str) -> str:
        r = self.runs.get(variant)
        return "not probed" if r is None else r.first_error()


def probe(bootstrap: str) -> KcatProbe:
    p = KcatProbe(version())
    for v in VARIANTS:
        _, p.runs[v] = metadata(bootstrap, v)
    return p
