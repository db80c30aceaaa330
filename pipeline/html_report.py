"""The HTML report: a summary, the tables (first rows) and inline SVG charts.

Invariant: pure Python over already-collected values (no Spark, no network,
no external assets): the file opens anywhere, offline. Every value is escaped.
"""

from __future__ import annotations

import html
import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

Series = Sequence[tuple[float, float | None]]

_STYLE = """
body{font-family:system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:13px}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}
th{background:#f3f3f3} td.k{text-align:left}
.warn{color:#b00;font-weight:bold}
"""


def svg_chart(title: str, a: Series, b: Series, label_a: str, label_b: str,
              width: int = 720, height: int = 260) -> str:
    """Two share series (0..1) over time as polylines, with axes and a legend."""
    left, right, top, bottom = 50, 20, 30, 40
    pts = [t for t, _ in (*a, *b)]
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'role="img" aria-label="{html.escape(title)}">',
             f'<text x="{left}" y="18" font-size="14">{html.escape(title)}</text>']
    x0, x1, y0, y1 = left, width - right, height - bottom, top
    parts.append(f'<line x1="{x0}" y1="{y0}" x2="{x1}" y2="{y0}" stroke="#444"/>')
    parts.append(f'<line x1="{x0}" y1="{y0}" x2="{x0}" y2="{y1}" stroke="#444"/>')
    for frac in (0.0, 0.5, 1.0):
        y = y0 - frac * (y0 - y1)
        parts.append(f'<text x="{x0 - 6}" y="{y + 4:.1f}" font-size="11" '
                     f'text-anchor="end">{int(frac * 100)}%</text>')
        parts.append(f'<line x1="{x0}" y1="{y:.1f}" x2="{x1}" y2="{y:.1f}" stroke="#eee"/>')
    if not pts:
        parts.append(f'<text x="{(x0 + x1) / 2}" y="{(y0 + y1) / 2}" '
                     'text-anchor="middle" font-size="13">no data</text></svg>')
        return "".join(parts)
    lo, hi = min(pts), max(pts)
    span = (hi - lo) or 1.0

    def xy(t: float, v: float) -> str:
        return f"{x0 + (t - lo) / span * (x1 - x0):.1f},{y0 - v * (y0 - y1):.1f}"

    for series, colour in ((a, "#1f77b4"), (b, "#d62728")):
        coords = [xy(t, v) for t, v in series if v is not None]
        if coords:
            parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" '
                         f'points="{" ".join(coords)}"/>')
            for c in coords if len(coords) < 60 else ():
                cx, cy = c.split(",")
                parts.append(f'<circle cx="{cx}" cy="{cy}" r="2.5" fill="{colour}"/>')
    for i, (t, anchor) in enumerate(((lo, "start"), (hi, "end"))):
        parts.append(f'<text x="{x0 if i == 0 else x1}" y="{y0 + 16}" font-size="11" '
                     f'text-anchor="{anchor}">{_utc(t)}</text>')
    ly = height - 8
    parts.append(f'<rect x="{x0}" y="{ly - 9}" width="12" height="4" fill="#1f77b4"/>'
                 f'<text x="{x0 + 16}" y="{ly}" font-size="11">{html.escape(label_a)}</text>')
    parts.append(f'<rect x="{x0 + 330}" y="{ly - 9}" width="12" height="4" fill="#d62728"/>'
                 f'<text x="{x0 + 346}" y="{ly}" font-size="11">{html.escape(label_b)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _utc(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(t))


def _cell(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, (list, dict)):
        return html.escape(json.dumps(v, default=str))
    return html.escape("" if v is None else str(v))


def table_html(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{_cell(v)}</td>" for v in row) + "</tr>"
                   for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def render(
    name: str,
    summary: dict[str, Any],
    tables: Mapping[str, tuple[Sequence[str], Sequence[Sequence[Any]], int]],
    charts: Sequence[tuple[str, Series, Series]],
    notes: Sequence[str],
) -> str:
    """``tables``: name -> (columns, first rows, total row count)."""
    out = [f"<!doctype html><html><head><meta charset='utf-8'><title>rackguard {name} report"
           f"</title><style>{_STYLE}</style></head><body>",
           f"<h1>rackguard {html.escape(name)} report</h1>",
           f"<p>Generated {_utc(time.time())}.</p>"]
    bad = summary.get("malformed_decision_rows", 0) + summary.get("malformed_snapshot_rows", 0)
    if bad:
        out.append(f"<p class='warn'>{bad} malformed ledger row(s) were excluded from every "
                   "figure (see summary).</p>")
    for title, a, b in charts:
        out.append(svg_chart(title, a, b, "share of partition-time (snapshots)",
                             "share of acknowledged bytes (ledger)"))
    out.append("<h2>Summary</h2><table>")
    for k, v in summary.items():
        out.append(f"<tr><td class='k'>{html.escape(k)}</td><td>{_cell(v)}</td></tr>")
    out.append("</table>")
    for note in notes:
        out.append(f"<p><em>{html.escape(note)}</em></p>")
    for tname, (columns, rows, total) in tables.items():
        shown = f" (first {len(rows)} of {total})" if total > len(rows) else ""
        out.append(f"<h2>{html.escape(tname)}{shown}</h2>")
        out.append(table_html(columns, rows))
    out.append("</body></html>")
    return "\n".join(out)
