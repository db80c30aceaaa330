"""Reading the proxy's /metrics in tests: one parse of Prometheus text into samples keyed
by name and labels, and the HTTP reads the tests make of it and of /readyz."""

from __future__ import annotations

import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

Key = tuple[str, tuple[tuple[str, str], ...]]
Samples = dict[Key, float]


def parse_samples(text: str) -> Samples:
    """Every sample of a Prometheus text exposition, by (name, sorted labels)."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def read_samples(url: str, timeout: float = 5.0) -> Samples:
    """GET a /metrics URL and parse it."""
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return parse_samples(response.read().decode())


def metrics_url(port: int) -> str:
    return f"http://127.0.0.1:{port}/metrics"


def sample(samples: Samples, name: str, **labels: str) -> float | None:
    """One sample's value, or None when it is absent."""
    return samples.get((name, tuple(sorted(labels.items()))))


def by_label(samples: Samples, name: str, label: str) -> dict[str, float]:
    """The samples of ``name`` by the value of one of their labels."""
    return {dict(labels)[label]: v for (n, labels), v in samples.items()
            if n == name and label in dict(labels)}


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum of the samples of ``name`` whose labels include ``labels``."""
    wanted = set(labels.items())
    return sum(v for (n, have), v in samples.items() if n == name and wanted <= set(have))


def http_status(url: str, timeout: float = 2.0) -> int:
    """The status of a GET (an error status too); 0 when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0
