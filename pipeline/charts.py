"""The reports' charts, drawn with matplotlib as static SVG for a self-contained HTML page.

Each chart keeps the data it was drawn from (``Chart.data``, plain lists), and
every drawn series carries an SVG id (``gid``) named after it, so tests check
what a chart shows by parsing the SVG and the data, not pixels.

Invariant: no pyplot (no global figure state, no display backend): each chart
is its own ``Figure``, rendered to text and dropped. Text stays text in the
SVG (``svg.fonttype = none``) and ids are stable from run to run.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

UNDER, AT, ABOVE = "#d62728", "#ff7f0e", "#2ca02c"
MAX_TOPICS = 6


@dataclass(frozen=True)
class Chart:
    """One figure: its id, title, the SVG text and the data it shows."""

    id: str
    title: str
    svg: str
    data: dict[str, Any]


@dataclass
class CoverageSeries:
    """One topic's rack coverage on a time grid: the share of its partitions whose ISR spans
    fewer than N, exactly N, more than N racks (None: no snapshot covers that time), and the
    proxy's refusals and observe mode's would-refusals in each step."""

    topic: str
    times: list[float]
    under: list[float | None]
    at: list[float | None]
    above: list[float | None]
    rejected: list[int] = field(default_factory=list)
    would_reject: list[int] = field(default_factory=list)

    @property
    def worst(self) -> float:
        return max((u for u in self.under if u is not None), default=0.0)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text)


def _figure(width: float, height: float) -> Any:
    import matplotlib

    matplotlib.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "rackguard",
                                "font.size": 9, "axes.spines.top": False,
                                "axes.spines.right": False, "timezone": "UTC"})
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def _svg(fig: Any) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})
    text = buf.getvalue()
    return text[text.index("<svg"):]  # inline: no XML prolog or doctype


def _dates(times: Sequence[float]) -> list[datetime]:
    return [datetime.fromtimestamp(t, tz=UTC) for t in times]


def _time_axis(ax: Any) -> None:
    import matplotlib.dates as mdates

    locator = mdates.AutoDateLocator(minticks=3, maxticks=7)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))


def coverage(series: Sequence[CoverageSeries], min_racks: int, step_s: float) -> Chart:
    """Per topic (worst first, at most MAX_TOPICS): stacked shares of partitions under / at /
    above N racks over time, refusals and would-refusals marked above the bands."""
    shown = sorted(series, key=lambda s: (-s.worst, s.topic))[:MAX_TOPICS]
    title = f"Rack coverage over time: in-sync replicas vs. min.insync.racks = {min_racks}"
    fig = _figure(9, 1.2 + 1.9 * max(1, len(shown)))
    axes = fig.subplots(max(1, len(shown)), 1, sharex=True, squeeze=False)[:, 0]
    data: dict[str, Any] = {"min_racks": min_racks, "step_s": step_s, "topics": {}}
    if not shown:
        axes[0].text(0.5, 0.5, "no snapshots in this ledger", ha="center", va="center",
                     transform=axes[0].transAxes)
        axes[0].set_axis_off()
    for ax, s in zip(axes, shown, strict=False):
        x = _dates(s.times)
        bands = [[v if v is not None else float("nan") for v in vals]
                 for vals in (s.under, s.at, s.above)]
        labels = (f"under {min_racks} racks", f"at {min_racks}", f"above {min_racks}")
        for i, (vals, colour, name) in enumerate(zip(bands, (UNDER, AT, ABOVE),
                                                     ("under", "at", "above"), strict=True)):
            low = [sum(b[j] for b in bands[:i]) for j in range(len(x))]
            high = [lo + v for lo, v in zip(low, vals, strict=True)]
            ax.fill_between(x, low, high, step="post", color=colour, alpha=0.85,
                            linewidth=0, label=labels[i],
                            gid=f"coverage-{_slug(s.topic)}-{name}")
        marks = [(x[j], s.rejected[j]) for j in range(len(x)) if j < len(s.rejected)
                 and s.rejected[j]]
        if marks:
            ax.scatter([m[0] for m in marks], [1.08] * len(marks), marker="v", color="black",
                       s=[18 + min(60, m[1]) for m in marks],
                       label="refused by the proxy", gid=f"rejected-{_slug(s.topic)}")
        would = [(x[j], s.would_reject[j]) for j in range(len(x))
                 if j < len(s.would_reject) and s.would_reject[j]]
        if would:
            ax.scatter([m[0] for m in would], [1.08] * len(would), marker="o",
                       facecolors="none", edgecolors="black",
                       label="observe mode: would refuse", gid=f"would-reject-{_slug(s.topic)}")
        ax.set_ylim(0, 1.16)  # the marks sit in the strip above 100 %
        ax.set_yticks([0, 0.5, 1], ["0 %", "50 %", "100 %"])
        ax.set_ylabel(s.topic, rotation=0, ha="right", va="center")
        data["topics"][s.topic] = {"times": s.times, "under": s.under, "at": s.at,
                                   "above": s.above, "rejected": s.rejected,
                                   "would_reject": s.would_reject}
    if shown:
        _time_axis(axes[-1])
        axes[-1].set_xlabel("time (UTC)")
        handles, names = axes[0].get_legend_handles_labels()
        fig.legend(handles, names, loc="outside upper right", ncols=5, frameon=False)
    fig.suptitle(title, x=0.01, ha="left", fontsize=11)
    if len(series) > len(shown):
        data["not_shown"] = len(series) - len(shown)
    return Chart("coverage", title, _svg(fig), data)


def bars(chart_id: str, title: str, labels: Sequence[str], values: Sequence[float],
         colours: Sequence[str], value_text: Sequence[str], ylabel: str,
         tick: Callable[[float], str]) -> Chart:
    """A bar per label, each bar's value written on it; ``tick`` formats the value axis."""
    from matplotlib.ticker import FuncFormatter

    fig = _figure(6.5, 2.8)
    ax = fig.subplots()
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: tick(v)))
    drawn = ax.bar(list(labels), list(values), color=list(colours))
    for bar, label, text in zip(drawn.patches, labels, value_text, strict=True):
        bar.set_gid(f"{chart_id}-bar-{_slug(label)}")
        ax.annotate(text, (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                    ha="center", va="bottom", xytext=(0, 2), textcoords="offset points")
    if not labels:
        ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
    ax.set_ylabel(ylabel)
    ax.margins(y=0.15)
    fig.suptitle(title, x=0.01, ha="left", fontsize=11)
    return Chart(chart_id, title, _svg(fig),
                 {"labels": list(labels), "values": list(values)})


def loss_timeline(missing: Sequence[tuple[float, int, int]],
                  found: Sequence[tuple[float, int, int]],
                  outages: Sequence[tuple[float, float]], topic_label: str) -> Chart:
    """Acknowledged offsets by the time they were acknowledged: missing ones in red, a
    sample of the ones found in grey; spans with some ISR on too few racks shaded."""
    title = f"Acknowledged offsets of {topic_label} by time acknowledged: missing in red"
    fig = _figure(9, 3.2)
    ax = fig.subplots()
    for i, (t0, t1) in enumerate(outages):
        d0, d1 = _dates((t0, t1))
        ax.axvspan(d0, d1, color="#bbbbbb", alpha=0.45, linewidth=0,
                   label="in-sync replicas on too few racks" if i == 0 else None,
                   gid=f"outage-{i}")
    if found:
        ax.scatter(_dates([t for t, _, _ in found]), [o for _, o, _ in found], s=6,
                   color="#7f7f7f", label="acknowledged, present", gid="found")
    if missing:
        ax.scatter(_dates([t for t, _, _ in missing]), [o for _, o, _ in missing], s=10,
                   color=UNDER, label="acknowledged, missing", gid="missing")
    if not (found or missing):
        ax.text(0.5, 0.5, "no acknowledged offsets", ha="center", va="center",
                transform=ax.transAxes)
    else:
        _time_axis(ax)
        ax.legend(loc="upper left", frameon=False)
    ax.set_ylabel("offset")
    ax.set_xlabel("acknowledged at (UTC)")
    fig.suptitle(title, x=0.01, ha="left", fontsize=11)
    return Chart("loss", title, _svg(fig), {
        "missing": [list(m) for m in missing], "found_sample": len(found),
        "outages": [list(o) for o in outages]})
