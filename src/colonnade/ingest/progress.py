"""Progress of an ingest as events, and the one summary line at the end.

The pipeline reports to a :class:`Progress`: once when the ingest starts (how many files, how
many bytes in all), then per file when it starts, as it goes (bytes of the input parsed, rows),
when it is skipped, and when it ends. Library code draws nothing: the command line renders
these events as a bar on a terminal (:mod:`colonnade.cli.progress`), and :class:`NullProgress`
(the default) ignores them. The caller prints :func:`summary_line` once the ingest returns;
that line is data about the run, not a log line.

What the events promise, per file: ``start_file``; ``identify`` events while the file is read
for its digest (its source identity; not when the caller gave one); then either ``skip_file``
(it was ingested before) or ``update`` events whose bytes never decrease and stay below the
file's size until every row has been read — the first one comes with the first rows parsed, not
after the file — then exactly one ``update`` with the file's size; and last ``end_file`` (also
after a failure, without the last ``update``). Bytes are those parsed and handed to the writer,
not those a reading thread has read ahead; rows are the rows handed to the writer.

A parallel ingest (:mod:`colonnade.ingest.parallel`) reports its whole input as one file (named
after it when it is one file, ``N files`` otherwise; ``start`` says 1 file): its digest, then
the bytes and rows of every worker added up, then the one commit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from colonnade.ingest.pipeline import FileResult, IngestResult


class Progress:
    """What the pipeline reports to; this base class reports nowhere."""

    def start(self, files: int, total_bytes: int) -> None:
        """An ingest of ``files`` files of ``total_bytes`` bytes in all starts."""

    def start_file(self, path: str, total_bytes: int) -> None:
        """A file of ``total_bytes`` bytes starts being read."""

    def identify(self, bytes_done: int) -> None:
        """So far, ``bytes_done`` bytes of the current file read for its digest."""

    def update(self, bytes_done: int, rows: int) -> None:
        """So far, ``bytes_done`` bytes of the current file parsed and ``rows`` rows read."""

    def skip_file(self, path: str, total_bytes: int) -> None:
        """The current file is skipped: its identity says it was ingested before."""

    def end_file(self) -> None:
        """The current file is done (committed, skipped or failed)."""

    def close(self) -> None:
        """The ingest is over."""

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class NullProgress(Progress):
    """No output while running (stderr is not a terminal, or progress was turned off)."""


def plural(n: int, noun: str) -> str:
    """``1 row``, ``2 rows``, ``1,000 rows``."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def summary_line(result: IngestResult) -> str:
    """One line on what an ingest did, e.g. ``ingested 1,000,000 rows from 1 file into gdelt
    (v3) in 4.2 s: 238,095 rows/s, 0 rejected``."""
    committed = [f for f in result.files if f.version is not None]
    skipped = [f for f in result.files if f.skipped]
    if not committed:
        if len(skipped) == 1:
            return f"{skipped[0].path}: {skipped[0].skipped}"
        return (f"nothing ingested into {result.dataset}: {plural(len(skipped), 'file')} skipped "
                f"({_reasons(skipped)}), 0 rows added")
    versions = sorted({f.version for f in committed if f.version is not None})  # one, in parallel
    at = f"v{versions[0]}" if len(versions) == 1 else f"v{min(versions)}-v{max(versions)}"
    line = (f"ingested {plural(result.rows, 'row')} from {plural(len(committed), 'file')} "
            f"into {result.dataset} ({at}) in {result.seconds:.1f} s: "
            f"{result.rows_per_second:,.0f} rows/s, {result.rejected:,} rejected")
    rejects = sorted({f.rejects for f in result.files if f.rejects})
    if rejects:
        line += f" (see {', '.join(rejects)})"
    if result.off_curve:
        line += (f", {plural(result.off_curve, 'row')} with NULL, NaN or out-of-range coordinates "
                 "(kept in the curve's NULL partition)")
    if skipped:
        line += f"; {len(skipped)} skipped ({_reasons(skipped)})"
    return line


def _reasons(skipped: list[FileResult]) -> str:
    reasons: dict[str, int] = {}
    for f in skipped:
        key = str(f.skipped).split(",")[0]
        reasons[key] = reasons.get(key, 0) + 1
    return ", ".join(f"{n} {r}" if n > 1 else r for r, n in reasons.items())
