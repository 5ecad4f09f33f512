"""How Colonnade's objects show in a notebook: HTML tables for a Store, a Dataset, a Scan and an
Explain report (their ``_repr_html_`` methods call these functions).

Everything shown is escaped. A repr must stay cheap whatever the size of the data: a store and
a dataset show what the commit log says; a scan shows its plan (which reads the segment index,
never a chunk) and a preview of its first rows only when the segments that hold them are small
(at most :data:`PREVIEW_BYTES` of the columns it reads); an Explain report shows what it holds.
"""

from __future__ import annotations

import datetime as dt
import html
import math
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from colonnade.ingest.progress import Progress

if TYPE_CHECKING:
    from colonnade.store import Explain, Store
    from colonnade.table.dataset import Dataset
    from colonnade.table.scan import Scan, ScanPlan

#: Rows a scan's preview shows.
PREVIEW_ROWS = 20
#: Chunk bytes a scan's preview may read; beyond that it shows the plan only.
PREVIEW_BYTES = 4 * 1024 * 1024
#: Datasets listed in a store's table.
MAX_DATASETS = 100

_STYLE = "border-collapse: collapse; font-size: 0.9em"


def store_html(store: Store) -> str:
    names = store.datasets()
    rows = []
    for name in names[:MAX_DATASETS]:
        snapshot = store.dataset(name).snapshot()
        rows.append([name, f"{snapshot.rows:,}", len(snapshot.segments), snapshot.version])
    more = f"<p>… and {len(names) - MAX_DATASETS} more</p>" if len(names) > MAX_DATASETS else ""
    count = _plural(len(names), "dataset")
    return (f"<div><p><b>Store</b> <code>{_esc(store.uri)}</code>: {count}</p>"
            + (table(["dataset", "rows", "segments", "version"], rows, right=[False, True, True, True])
               if rows else "")
            + more + "</div>")


def dataset_html(dataset: Dataset) -> str:
    from colonnade.schema.types import type_name

    snapshot = dataset.snapshot()
    spec = dataset.spec
    facts = [
        ("rows", f"{snapshot.rows:,}"),
        ("segments", len(snapshot.segments)),
        ("partitions", len({s.partition for s in snapshot.segments})),
        ("version", snapshot.version),
        ("partition by", ", ".join(str(t) for t in spec.partition_by) or "(none)"),
        ("sort by", ", ".join(spec.sort_by) or "(none)"),
    ]
    columns = [[f.name, type_name(f.type)] for f in dataset.schema]
    return (f"<div><p><b>Dataset</b> <code>{_esc(dataset.name)}</code> in "
            f"<code>{_esc(dataset.store.uri)}</code></p>"
            + table(["", ""], facts, header=False)
            + table(["column", "type"], columns) + "</div>")


def scan_html(scan: Scan) -> str:
    plan = scan.plan()
    m = plan.metrics
    columns = ", ".join(plan.columns) if scan.columns is not None else "(all)"
    facts = [
        ("version", plan.snapshot.version),
        ("columns", columns),
        ("filter", m.filter or "(none)"),
        ("partitions to read", f"{m.partitions_scanned} of {m.partitions_total}"),
        ("segments to read", f"{m.segments_scanned} of {m.segments_total}"),
        ("rows in them", f"{sum(s.entry.rows for s in plan.segments):,}"),
    ]
    out = (f"<div><p><b>Scan</b> of <code>{_esc(scan.dataset.name)}</code></p>"
           + table(["", ""], facts, header=False))
    head = _preview_plan(plan)
    if head is None:
        out += (f"<p>No preview: the first rows are in segments of more than "
                f"{PREVIEW_BYTES // (1024 * 1024)} MiB (<code>.to_arrow()</code> reads them).</p>")
    elif head.segments:
        preview = _first_rows(scan, head)
        names = list(preview.column_names)
        values = list(zip(*(c.to_pylist() for c in preview.columns), strict=True)) if names else []
        where = (f" (the filter applied to {len(head.segments)} of the {len(plan.segments)} segments)"
                 if scan.filter is not None and len(head.segments) < len(plan.segments) else "")
        out += (f"<p>first {_plural(len(values), 'row')}{where}</p>"
                + table(names, [[_cell(v) for v in row] for row in values],
                        right=[_numeric(f.type) for f in preview.schema]))
    return out + "</div>"


def explain_html(report: Explain) -> str:
    t = report.totals()
    facts = [
        ("segments scanned", f"{t['segments_scanned']} of {t['segments_total']}"),
        ("partitions scanned", f"{t['partitions_scanned']} of {t['partitions_total']}"),
        ("chunks read", f"{t['chunks_read']:,} ({t['bytes_read']:,} bytes)"),
        ("rows scanned", f"{t['rows_scanned']:,}"),
        ("answer rows", f"{report.rows:,}"),
        ("time", f"{report.seconds * 1000:.1f} ms"),
    ]
    scans = [[name, ", ".join(m.get("columns") or []) or "(none)", m.get("filter") or "(none)",
              f"{m['segments_scanned']} of {m['segments_total']}", f"{m['rows_scanned']:,}"]
             for name, ms in report.scans.items() for m in ms]
    return ("<div><p><b>Explain</b> <code>" + _esc(report.query) + "</code></p>"
            + table(["", ""], facts, header=False)
            + (table(["dataset", "columns", "filter", "segments", "rows scanned"], scans) if scans else "")
            + "<details><summary>DuckDB plan</summary><pre>" + _esc(report.plan) + "</pre></details></div>")


# -- building blocks ------------------------------------------------------------------------------
def table(columns: Sequence[str], rows: Sequence[Sequence[Any]], right: Sequence[bool] | None = None,
          header: bool = True) -> str:
    """An HTML table of ``rows`` (every value escaped); ``right`` marks right-aligned columns."""
    align = list(right or [False] * len(columns))
    parts = [f'<table style="{_STYLE}">']
    if header:
        parts.append("<thead><tr>" + "".join(
            f'<th style="text-align: {"right" if r else "left"}">{_esc(c)}</th>'
            for c, r in zip(columns, align, strict=True)) + "</tr></thead>")
    parts.append("<tbody>")
    for row in rows:
        parts.append("<tr>" + "".join(
            f'<td style="text-align: {"right" if r else "left"}">{_esc(v)}</td>'
            for v, r in zip(row, align, strict=True)) + "</tr>")
    parts.append("</tbody></table>")
    return "".join(parts)


def _preview_plan(plan: ScanPlan) -> ScanPlan | None:
    """The first segments of ``plan`` that hold (up to) the preview's rows, if they are small."""
    budget = PREVIEW_BYTES
    rows = 0
    chosen = []
    for seg in plan.segments:
        budget -= sum(seg.stats[c].nbytes for c in plan.read_columns if c in seg.stats)
        if budget < 0:
            return None
        chosen.append(seg)
        rows += seg.entry.rows
        if rows >= PREVIEW_ROWS:
            break
    from colonnade.table.scan import ScanMetrics

    return replace(plan, segments=tuple(chosen), metrics=ScanMetrics())


def _first_rows(scan: Scan, plan: ScanPlan) -> Any:
    import pyarrow as pa

    schema = pa.schema([plan.schema.field(c) for c in plan.columns])
    batches = []
    rows = 0
    for batch in scan.to_batches(plan):
        batches.append(batch)
        rows += batch.num_rows
        if rows >= PREVIEW_ROWS:
            break
    return pa.Table.from_batches(batches, schema=schema).slice(0, PREVIEW_ROWS)


def _numeric(type_: Any) -> bool:
    import pyarrow as pa

    if pa.types.is_dictionary(type_):
        type_ = type_.value_type
    return bool(pa.types.is_integer(type_) or pa.types.is_floating(type_) or pa.types.is_decimal(type_))


def _cell(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, bytes | bytearray):
        return "0x" + bytes(value).hex()
    return str(value)


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


class NotebookProgress(Progress):
    """An ingest's progress as an HTML bar in a notebook cell, updated in place through an
    IPython display handle (no widget library needed): bytes parsed of the whole input, rows,
    rows per second and the time left at that rate. Pass it to an ingest::

        from colonnade.ingest.pipeline import ingest
        from colonnade.notebook import NotebookProgress
        with NotebookProgress() as progress:
            ingest(store, "trips", ["trips.csv"], progress=progress)
    """

    def __init__(self, refresh_s: float = 0.25) -> None:
        from IPython.display import HTML, display

        self._refresh_s = refresh_s
        self._total = self._done_before = self._bytes = self._rows = self._rows_before = 0
        self._started = time.perf_counter()
        self._shown = 0.0
        self._name = ""
        self._html = HTML
        self._handle = display(HTML(self._render()), display_id=True)

    def start(self, files: int, total_bytes: int) -> None:
        self._total = total_bytes
        self._started = time.perf_counter()
        self._show(force=True)

    def start_file(self, path: str, total_bytes: int) -> None:
        self._name = path

    def update(self, bytes_done: int, rows: int) -> None:
        self._bytes, self._rows = bytes_done, rows
        self._show()

    def skip_file(self, path: str, total_bytes: int) -> None:
        self._done_before += total_bytes

    def end_file(self) -> None:
        self._done_before += self._bytes
        self._rows_before += self._rows
        self._bytes = self._rows = 0

    def close(self) -> None:
        self._show(force=True, final=True)

    def _show(self, force: bool = False, final: bool = False) -> None:
        now = time.perf_counter()
        if not force and now - self._shown < self._refresh_s:
            return
        self._shown = now
        if self._handle is not None:
            self._handle.update(self._html(self._render(final)))

    def _render(self, final: bool = False) -> str:
        total, done = self._total, self._done_before + self._bytes
        rows = self._rows_before + self._rows
        elapsed = time.perf_counter() - self._started
        rate = rows / elapsed if elapsed > 0 else 0.0
        left = (total - done) * elapsed / done if done and total > done and not final else 0.0
        what = "done" if final else (html.escape(self._name) or "starting")
        return (f'<div><progress value="{done}" max="{max(total, 1)}" style="width: 40em"></progress> '
                f"{what}: {rows:,} rows, {rate:,.0f} rows/s"
                f"{f', about {left:,.0f} s left' if left else ''}</div>")
