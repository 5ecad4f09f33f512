"""``colonnade demo``: the GDELT layout study in one command, also callable as :func:`run_demo`.

It generates GDELT-shaped events (the 1979–1984 backfile has 4,037,539 of them) as a
header-less TSV, ingests the file into dataset ``gdelt`` partitioned by ``MonthYear`` (a ``gdelt``
made by an earlier demo is dropped first, so the answers are those of this file; a ``gdelt`` the
demo did not make is never touched: the demo stops with an error), and
runs the study's three queries, with ``explain`` showing how the ``MonthYear`` filter of Q3
prunes segments.
"""

from __future__ import annotations

import re
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from colonnade.cli.context import Settings, pass_settings
from colonnade.cli.output import echo_json, human_bytes, note, print_table, stderr_is_tty
from colonnade.cli.progress import ingest_progress, row_bar, summary
from colonnade.errors import DatasetError

if TYPE_CHECKING:
    import pyarrow as pa

DATASET = "gdelt"
DEFAULT_ROWS = 1_000_000
FULL_ROWS = 4_037_539

#: The queries of the original study, by name.
QUERIES: tuple[tuple[str, str], ...] = (
    ("Q1", "SELECT count(NumArticles) FROM gdelt"),
    ("Q2", "SELECT Actor1Name, avg(AvgTone) AS tone FROM gdelt GROUP BY Actor1Name "
           "ORDER BY tone DESC LIMIT 10"),
    ("Q3", "SELECT avg(AvgTone), min(AvgTone), max(AvgTone) FROM gdelt WHERE MonthYear = 198012"),
)


#: Source identities of the demo's ingests start with this: how it knows a dataset is its own.
DEMO_SOURCE = "colonnade-demo:gdelt:"


def made_by_demo(commits: list[Any]) -> bool:
    """Whether every commit of a dataset is an ingest of the demo (also as earlier releases
    recorded it: the generated file in a ``colonnade-demo-*`` temporary directory)."""
    def ours(source: str | None) -> bool:
        return source is not None and (source.startswith(DEMO_SOURCE) or re.match(
            r"^file:.*/colonnade-demo-[^/]*/gdelt-\d+\.tsv:", source) is not None)

    return bool(commits) and all(ours(c.source) for c in commits)  # an empty one may be anyone's


@dataclass
class QueryRun:
    name: str
    sql: str
    answer: pa.Table
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "sql": self.sql, "seconds": self.seconds,
                "answer": self.answer.to_pylist()}


@dataclass
class DemoResult:
    store: str
    rows: int
    data_bytes: int
    generate_seconds: float
    ingest: Any  # the pipeline's IngestResult
    ingest_seconds: float
    dropped_existing: bool
    data_file: Path | None = None  # set when the generated file was kept
    queries: list[QueryRun] = field(default_factory=list)
    explain_q3: dict[str, Any] = field(default_factory=dict)

    def answer(self, name: str) -> pa.Table:
        return next(q.answer for q in self.queries if q.name == name)

    def to_dict(self) -> dict[str, Any]:
        return {"store": self.store, "rows": self.rows, "data_bytes": self.data_bytes,
                "data_file": str(self.data_file) if self.data_file else None,
                "generate_seconds": self.generate_seconds, "ingest_seconds": self.ingest_seconds,
                "dropped_existing": self.dropped_existing, "ingest": self.ingest.to_dict(),
                "queries": [q.to_dict() for q in self.queries], "explain_q3": self.explain_q3}


def run_demo(rows: int = DEFAULT_ROWS, store: str | None = None, data_dir: str | Path | None = None,
             keep: bool = False, seed: int = 42, show_progress: bool = False,
             log: Callable[[str], None] = lambda message: None) -> DemoResult:
    """Generate ``rows`` GDELT-shaped events, ingest them into ``store`` as dataset ``gdelt``
    and run the study's queries.

    The TSV is written to ``data_dir`` (default: a temporary directory) and removed afterwards
    unless ``keep``. ``store`` defaults to ``$COLONNADE_STORE``, else ``./colonnade.db``.
    """
    import colonnade
    from colonnade.bench.gdelt_data import generate, schema_text
    from colonnade.config import default_store_uri
    from colonnade.ingest.pipeline import ingest
    from colonnade.schema.types import parse_schema_text

    if rows < 1:
        raise ValueError(f"rows must be ≥ 1, got {rows}")
    made_dir = data_dir is None
    directory = Path(tempfile.mkdtemp(prefix="colonnade-demo-")) if made_dir else Path(data_dir)  # type: ignore[arg-type]
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"gdelt-{rows}.tsv"
    try:
        # 1. the data
        log(f"generating {rows:,} GDELT-shaped row{'s' if rows != 1 else ''} into {path}")
        start = time.perf_counter()
        with row_bar(show_progress, rows, "generating") as update:
            nbytes = generate(path, rows, seed=seed, progress=update)
        generate_s = time.perf_counter() - start
        log(f"generated {human_bytes(nbytes)} in {generate_s:.1f} s")

        # 2. the ingest
        with colonnade.connect(store or default_store_uri()) as st:
            dropped = DATASET in st
            if dropped:
                existing = st.dataset(DATASET)
                if not made_by_demo(existing.history()):
                    raise DatasetError(
                        f"{st.uri} holds a dataset {existing.name!r} that the demo did not create; "
                        "the demo replaces only its own: run it on another store (--store)")
                log(f"dropping the dataset {existing.name!r} an earlier demo made in {st.uri}")
                st.drop_dataset(existing.name)
            schema = parse_schema_text(schema_text(), source="gdelt schema")
            log(f"ingesting into {st.uri} as dataset {DATASET!r}, partitioned by MonthYear")
            start = time.perf_counter()
            with ingest_progress(show_progress) as progress:
                ingested = ingest(st, DATASET, [path], fmt="tsv", delimiter="\t", header=False, quote_char=None,
                                  schema=schema, partition_by="MonthYear", progress=progress,
                                  source_id=f"{DEMO_SOURCE}rows={rows}:seed={seed}")
            ingest_s = time.perf_counter() - start
            log(summary(ingested))
            result = DemoResult(st.uri, rows, nbytes, generate_s, ingested, ingest_s, dropped)

            # 3. the study's queries, and what Q3's filter pruned; each timed as it runs once the
            # SQL layer is loaded (the first statement of a process loads the parser and DuckDB)
            st.sql("SELECT 1")
            st.sql("SELECT min(MonthYear) FROM gdelt")
            for name, query in QUERIES:
                start = time.perf_counter()
                answer = st.sql(query)
                result.queries.append(QueryRun(name, query, answer, time.perf_counter() - start))
            q3 = st.explain(QUERIES[2][1])
            result.explain_q3 = {**q3.totals(), "seconds": q3.seconds}
    finally:
        if keep:
            log(f"kept the data file {path}")
        elif made_dir:
            shutil.rmtree(directory, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    if keep:
        result.data_file = path
    return result


def print_demo(result: DemoResult) -> None:
    """The answers of the demo's queries, their timings and Q3's pruning, for people."""
    for q in result.queries:
        click.echo(f"{q.name}  {q.sql}")
        print_table(list(q.answer.column_names),
                    list(zip(*(c.to_pylist() for c in q.answer.columns), strict=True)))
        click.echo(f"    {q.seconds * 1000:,.1f} ms")
        click.echo()
    e = result.explain_q3
    click.echo(f"Q3 pruning: scanned {e['segments_scanned']} of {e['segments_total']} segments "
               f"({e['partitions_scanned']} of {e['partitions_total']} partitions), "
               f"read {e['chunks_read']} chunks, {human_bytes(e['bytes_read'])}")


@click.command()
@click.option("--rows", type=click.IntRange(min=1), default=DEFAULT_ROWS, show_default=True,
              help=f"Rows to generate ({FULL_ROWS:,} is the size of the original study).")
@click.option("--store", "store_uri", metavar="URI",
              help="Store to load (default: the group's --store, $COLONNADE_STORE, ./colonnade.db).")
@click.option("--keep", is_flag=True, help="Keep the generated TSV.")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), metavar="DIR",
              help="Where the TSV is written (default: a temporary directory).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_settings
def demo(settings: Settings, rows: int, store_uri: str | None, keep: bool, data_dir: Path | None,
         as_json: bool) -> None:
    """Generate GDELT-shaped data, ingest it as dataset 'gdelt', and run the study's queries."""
    result = run_demo(rows=rows, store=store_uri or settings.store, data_dir=data_dir, keep=keep,
                      show_progress=stderr_is_tty(), log=note)
    if as_json:
        echo_json(result.to_dict())
    else:
        print_demo(result)
