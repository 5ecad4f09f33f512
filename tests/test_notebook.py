"""Notebook display: Store, Dataset, Scan and Explain render as escaped HTML tables, and a scan's
display never reads more than a small preview (on every store)."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator, Sequence
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import colonnade
from colonnade import notebook
from colonnade.storage.base import ChunkRef
from colonnade.store import Store

NASTY = '<script>alert("x")</script> & <b>co</b>'
SCHEMA = pa.schema([("id", pa.int64()), ("label", pa.string()), ("day", pa.date32()),
                    ("score", pa.float64())])


class Tables(HTMLParser):
    """The text of every table cell of a page, table by table, and every other text."""

    def __init__(self, page: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: list[list[list[str]]] = []
        self.text: list[str] = []
        self.tags: list[str] = []
        self._cell: list[str] | None = None
        self.feed(page)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)
        else:
            self.text.append(data)


def events(n: int, start: int = 0) -> pa.Table:
    return pa.table({
        "id": list(range(start, start + n)),
        "label": [NASTY if i % 2 == 0 else f"row {i}" for i in range(start, start + n)],
        "day": [dt.date(2024, 1, 1) + dt.timedelta(days=i) for i in range(start, start + n)],
        "score": [None if i % 5 == 0 else i * 0.5 for i in range(start, start + n)],
    }, schema=SCHEMA)


@pytest.fixture
def counted_reads(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[ChunkRef]:
    """Every chunk the store is asked for from here on."""
    asked: list[ChunkRef] = []
    original = store.chunk_store.get_chunks

    def get_chunks(dataset: str, refs: Sequence[ChunkRef]) -> Iterator[tuple[ChunkRef, bytes]]:
        asked.extend(refs)
        return original(dataset, refs)

    monkeypatch.setattr(store.chunk_store, "get_chunks", get_chunks)
    return asked


def test_store_lists_its_datasets(store: Store) -> None:
    store.create_dataset("first", SCHEMA).append(events(3))
    store.create_dataset("second", SCHEMA)
    page = Tables(store._repr_html_())
    assert page.tables == [[["dataset", "rows", "segments", "version"], ["first", "3", "1", "1"],
                            ["second", "0", "0", "0"]]]
    assert "2 datasets" in "".join(page.text)


def test_dataset_shows_its_facts_and_columns(store: Store) -> None:
    ds = store.create_dataset("spec", SCHEMA, partition_by="bucket(4, id)", sort_by="day")
    ds.append(events(10))
    page = Tables(ds._repr_html_())
    facts, columns = page.tables
    assert dict(facts) == {"rows": "10", "segments": str(len(ds.snapshot().segments)),
                           "partitions": str(len({s.partition for s in ds.snapshot().segments})),
                           "version": "1", "partition by": "bucket(4, id)", "sort by": "day"}
    assert columns == [["column", "type"], ["id", "int64"], ["label", "string"], ["day", "date32"],
                       ["score", "float64"]]


def test_scan_shows_its_plan_and_first_rows_escaped(store: Store) -> None:
    ds = store.create_dataset("small", SCHEMA)
    ds.append(events(30))
    html = ds.scan(columns=["id", "label", "score"])._repr_html_()
    assert "<script>" not in html and "&lt;script&gt;" in html
    page = Tables(html)
    plan, preview = page.tables
    assert dict(plan)["segments to read"] == "1 of 1"
    assert dict(plan)["columns"] == "id, label, score"
    assert preview[0] == ["id", "label", "score"]
    assert len(preview) == 1 + notebook.PREVIEW_ROWS
    assert preview[1] == ["0", NASTY, "NULL"]  # the value shown as text, not as markup
    assert preview[2] == ["1", "row 1", "0.5"]


def test_scan_preview_reads_only_the_segments_it_shows(store: Store, counted_reads: list[ChunkRef]) -> None:
    ds = store.create_dataset("many", SCHEMA, segment_rows=8)
    for start in range(0, 80, 8):
        ds.append(events(8, start))
    assert len(ds.snapshot().segments) == 10
    counted_reads.clear()
    page = Tables(ds.scan(filter=pc.field("id") >= 4)._repr_html_())
    plan, preview = page.tables
    assert dict(plan)["segments to read"] == "10 of 10"
    assert [row[0] for row in preview[1:]] == [str(i) for i in range(4, 24)]
    assert len({ref.segment for ref in counted_reads}) == 3  # 24 rows: 3 segments of 8, not 10


def test_scan_of_big_segments_shows_the_plan_only(store: Store, counted_reads: list[ChunkRef],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    ds = store.create_dataset("big", SCHEMA)
    ds.append(events(100))
    monkeypatch.setattr(notebook, "PREVIEW_BYTES", 64)  # as if each segment held megabytes
    counted_reads.clear()
    page = Tables(ds.scan()._repr_html_())
    assert len(page.tables) == 1
    assert dict(page.tables[0])["rows in them"] == "100"
    assert "No preview" in "".join(page.text)
    assert counted_reads == []  # not one chunk read


def test_explain_shows_what_was_read(store: Store) -> None:
    store.create_dataset("ex", SCHEMA, partition_by="bucket(4, id)").append(events(40))
    query = "SELECT count(*) AS n FROM ex WHERE id = 7 AND label <> '<&>'"
    report = store.explain(query)
    page = Tables(report._repr_html_())
    facts, scans = page.tables
    totals = report.totals()
    assert dict(facts)["segments scanned"] == f"{totals['segments_scanned']} of {totals['segments_total']}"
    assert dict(facts)["answer rows"] == "1"
    assert scans[0] == ["dataset", "columns", "filter", "segments", "rows scanned"]
    assert scans[1][0] == "ex"
    text = "".join(page.text)
    assert query in text and report.plan.strip().splitlines()[0].strip() in text


def test_table_escapes_every_value() -> None:
    page = Tables(notebook.table(["<a>", "b&"], [["<i>x</i>", '"q"'], [None, 1.5]]))
    assert page.tables == [[["<a>", "b&"], ["<i>x</i>", '"q"'], ["None", "1.5"]]]
    assert page.tags.count("i") == 0 and page.tags.count("a") == 0


def test_an_ingest_shows_its_progress_in_a_notebook_cell(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The bar is one display, updated in place; here IPython's display is a recording stand-in
    (IPython is not a dependency of Colonnade)."""
    import sys
    import types

    from colonnade.ingest.pipeline import ingest
    from colonnade.notebook import NotebookProgress

    shown: list[str] = []

    class Handle:
        def update(self, obj: Any) -> None:
            shown.append(obj.data)

    class HTML:
        def __init__(self, data: str) -> None:
            self.data = data

    def display(obj: Any, display_id: bool = False) -> Handle:
        assert display_id  # updated in place, not a new output per update
        shown.append(obj.data)
        return Handle()

    fake = types.ModuleType("IPython.display")
    fake.HTML, fake.display = HTML, display  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "IPython", types.ModuleType("IPython"))
    monkeypatch.setitem(sys.modules, "IPython.display", fake)
    path = tmp_path / "big.csv"
    path.write_text("id,name\n" + "".join(f"{i},n{i % 97}\n" for i in range(400_000)))
    with colonnade.connect(str(tmp_path / "s.db")) as store, NotebookProgress(refresh_s=0) as progress:
        result = ingest(store, "t", [path], progress=progress)
    assert result.rows == 400_000
    values = [int(m) for m in re.findall(r'<progress value="(\d+)"', "".join(shown))]
    assert values == sorted(values) and values[-1] == path.stat().st_size and len(set(values)) > 2
    assert "done: 400,000 rows" in shown[-1] and "s left" in "".join(shown[1:-1])
    for html_text in shown:
        HTMLParser().feed(html_text)  # well-formed enough to parse
