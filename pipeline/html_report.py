"""The HTML report: the verdict first, what to do, the charts, the key figures, the tables.

Invariant: pure Python over already-collected values (no Spark, no network,
no script, no external asset): the file opens anywhere, offline. Every value
is escaped and shown with its label and unit (pipeline.labels); no JSON in a
cell, and no table that repeats the key figures.
"""

from __future__ import annotations

import html
import time
from collections.abc import Mapping, Sequence
from typing import Any

from pipeline.charts import Chart
from pipeline.labels import label, table_title, utc_time, value_text
from pipeline.verdicts import Verdict

_STYLE = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222;
 line-height:1.45;padding:0 1em}
h1{font-size:1.5em;margin-bottom:.2em} .meta{color:#666;margin-top:0}
.verdict{border-left:6px solid #444;background:#f6f6f6;padding:.6em 1.2em;margin:1em 0}
.verdict.risk{border-color:#d62728;background:#fdf0f0}
.verdict.ok{border-color:#2ca02c;background:#f0f8f0}
.verdict p:first-child{font-size:1.15em;font-weight:600}
figure{margin:1.5em 0} figure svg{max-width:100%;height:auto}
table{border-collapse:collapse;margin:.6em 0 1.6em;font-size:13px}
td,th{border:1px solid #ddd;padding:3px 8px;text-align:right;vertical-align:top}
td{white-space:nowrap}
th{background:#f3f3f3} td.k,th.k{text-align:left}
.warn{color:#b00;font-weight:bold}
"""

# summary keys not shown among the key figures: nested (shown as their own table), or
# said in the page's header line
_NOT_KEY_FIGURES = {"by_min_racks", "malformed_samples", "decision_files", "snapshot_files"}
# tables written for other tools that would repeat the key figures on the page
_REPEATS = {("durability", "overall")}
_TEXT_COLUMNS = {"topic", "instance", "client_id", "decision", "reason", "replicas",
                 "replica_racks", "isr_racks", "topics", "instances"}


def _cell(column: str, v: Any) -> str:
    cls = " class='k'" if column in _TEXT_COLUMNS else ""
    return f"<td{cls}>{html.escape(value_text(column, v))}</td>"


def table_html(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    head = "".join(f"<th{' class=k' if c in _TEXT_COLUMNS else ''}>{html.escape(label(c))}</th>"
                   for c in columns)
    body = "".join("<tr>" + "".join(_cell(c, v) for c, v in zip(columns, row, strict=True))
                   + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _key_figures(summary: Mapping[str, Any]) -> str:
    rows = "".join(f"<tr><td class='k'>{html.escape(label(k))}</td>"
                   f"<td>{html.escape(value_text(k, v))}</td></tr>"
                   for k, v in summary.items() if k not in _NOT_KEY_FIGURES)
    return f"<h2>Key figures</h2><table>{rows}</table>"


def _verdict_html(verdict: Verdict) -> str:
    cls = "risk" if verdict.at_risk else "ok"
    findings = "".join(f"<p>{html.escape(f)}</p>" for f in verdict.findings)
    advice = "".join(f"<li>{html.escape(a)}</li>" for a in verdict.advice)
    return (f"<section class='verdict {cls}' id='verdict'>{findings}</section>"
            f"<h2>What to do</h2><ul id='advice'>{advice}</ul>")


def render(
    name: str,
    verdict: Verdict,
    summary: Mapping[str, Any],
    tables: Mapping[str, tuple[Sequence[str], Sequence[Sequence[Any]], int]],
    charts: Sequence[Chart],
    notes: Sequence[str],
    generated: float | None = None,
) -> str:
    """``tables``: name -> (columns, first rows, total row count)."""
    files = (f"{summary.get('decision_files', 0):,} decision file(s), "
             f"{summary.get('snapshot_files', 0):,} snapshot file(s)")
    out = [f"<!doctype html><html lang='en'><head><meta charset='utf-8'>"
           f"<title>rackguard {html.escape(name)} report</title><style>{_STYLE}</style>"
           "</head><body>",
           f"<h1>rackguard {html.escape(name)} report</h1>",
           f"<p class='meta'>Ledger: {files}. Generated "
           f"{utc_time(time.time() if generated is None else generated)}.</p>",
           _verdict_html(verdict)]
    bad = summary.get("malformed_decision_rows", 0) + summary.get("malformed_snapshot_rows", 0)
    if bad:
        samples = "".join(f"<li><code>{html.escape(str(s))}</code></li>"
                          for s in summary.get("malformed_samples", [])[:3])
        out.append(f"<p class='warn'>{bad:,} malformed ledger row(s) were excluded from every "
                   f"figure, for example (as read, cut at 200 characters):</p><ul>{samples}</ul>")
    for chart in charts:
        out.append(f"<figure id='chart-{html.escape(chart.id)}' "
                   f"aria-label='{html.escape(chart.title)}'>{chart.svg}</figure>")
    out.append(_key_figures(summary))
    for note in notes:
        out.append(f"<p><em>Note: {html.escape(note)}</em></p>")
    for tname, (columns, rows, total) in tables.items():
        if (name, tname) in _REPEATS:
            continue
        shown = f" (first {len(rows):,} of {total:,})" if total > len(rows) else ""
        out.append(f"<h2>{html.escape(table_title(tname))}{shown}</h2>")
        out.append(table_html(columns, rows) if rows else "<p>None.</p>")
    out.append("</body></html>")
    return "\n".join(out)
