"""An Arrow IPC stream (standard input, a pipe, a socket) ingested batch by batch, in one commit.

The stream is read with ``pyarrow.ipc.open_stream`` one record batch at a time and each batch is
handed to the writer as it arrives, so memory holds a batch or two and the segments being
filled, however long the stream. The dataset is created from the stream's schema when it does
not exist (recorded by the commit, so an empty or failed stream creates nothing). The bytes are
digested as they pass: the source identity is ``stdin:<size>:sha256:<digest>`` — what a spooled
standard input gets — unless the caller names one, and it is only known at the end, so the rows
are written as one part of a write operation (``Dataset.prepare_write`` / ``write_part``) and
committed with the identity once the stream has ended (``commit_write``); a stream that was
ingested before is then skipped and its segments removed. Anything that fails before the commit
(a corrupt message, a type the dataset can't take, Ctrl-C) commits nothing.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, BinaryIO, cast

import pyarrow as pa
import pyarrow.ipc as ipc

from colonnade.config import WriteSettings
from colonnade.errors import IngestError
from colonnade.ingest.interrupts import HeldCommits, IngestInterrupted, interrupts_held
from colonnade.ingest.pipeline import (
    ALREADY_INGESTED,
    FileResult,
    IngestResult,
    dataset_for,
)
from colonnade.ingest.progress import NullProgress, Progress
from colonnade.schema.types import check_storable
from colonnade.table.conform import conform
from colonnade.table.dataset import Dataset

if TYPE_CHECKING:
    from colonnade.storage.base import ChunkStore
    from colonnade.store import Store


class _Digesting:
    """A readable stream that digests (SHA-256) and counts what is read from it."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self.digest = hashlib.sha256()
        self.size = 0
        self.closed = False

    def read(self, n: int = -1) -> bytes:
        data = self._stream.read(n)
        self.digest.update(data)
        self.size += len(data)
        return data

    def readable(self) -> bool:
        return True


def ingest_arrow_stream(store: Store, dataset_name: str, stream: BinaryIO, *,
                        name: str = "<stdin>", source_id: str | None = None, force: bool = False,
                        partition_by: str | list[str] | None = None,
                        sort_by: str | list[str] | None = None, segment_rows: int | None = None,
                        compression: str | None = None, schema_mode: str = "strict",
                        settings: WriteSettings | None = None,
                        progress: Progress | None = None) -> IngestResult:
    """Append the Arrow IPC stream ``stream`` to ``dataset_name`` (created from the stream's
    schema if absent) in one commit; see the module docstring. ``name`` is how messages name
    the input. The options are those of :func:`~colonnade.ingest.pipeline.ingest` (schema mode
    strict only: a stream is written before its end is known, so it cannot add columns)."""
    if schema_mode != "strict":
        raise IngestError("an Arrow stream is ingested with schema mode strict (it cannot add "
                          "columns); spool it to a file to merge new columns")
    progress = progress or NullProgress()
    started = time.perf_counter()
    source = _Digesting(stream)
    try:
        reader = ipc.open_stream(source)
    except (pa.ArrowException, OSError) as exc:
        raise IngestError(f"{name}: not a readable Arrow IPC stream: {_reason(exc)}") from None
    result = IngestResult(dataset_name)
    with reader:
        check_storable(reader.schema)
        target = dataset_for(store, dataset_name, lambda: reader.schema, partition_by, sort_by,
                             segment_rows, compression)
        assert target is not None
        # a stream whose columns the dataset can't take fails before anything is written
        conform(target.name, pa.RecordBatch.from_pylist([], schema=reader.schema), target.schema)
        progress.start(1, 0)
        progress.start_file(name, 0)
        if source_id is not None and not force and target.find_source(source_id) is not None:
            progress.skip_file(name, 0)
            progress.end_file()
            result.files = [FileResult(name, skipped=ALREADY_INGESTED)]
            return result
        # the commit record is written with Ctrl-C held, so that the log is final when read back
        writer = Dataset(cast("ChunkStore", HeldCommits(target.store)), target.spec,
                         recorded=target.recorded)
        op = writer.prepare_write()
        try:
            part = writer.write_part(op, _batches(reader, source, name, progress), settings)
            identity = source_id or f"stdin:{source.size}:sha256:{source.digest.hexdigest()}"
            op = dataclasses.replace(op, source=identity)
            run = uuid.uuid4().hex
            try:
                appended = writer.commit_write(op, [part], force=force, info={"input": name, "run": run})
            except KeyboardInterrupt:
                landed = _landed(writer, op.id, op.read_version)
                if landed is None:
                    raise
                result.files = [FileResult(name, rows=part.rows, bytes_in=source.size,
                                           version=landed, segments=len(part.entries),
                                           bytes_written=part.bytes)]
                raise IngestInterrupted(result, []) from None
            if appended.version is None and part.entries:
                writer.abort_write(op, [part])  # ingested before: this copy goes
        finally:
            progress.end_file()
            target.recorded = writer.recorded
            target.recorded_here = target.recorded_here or writer.recorded_here
    seconds = time.perf_counter() - started
    skipped = None
    if appended.version is None:
        skipped = ALREADY_INGESTED if part.rows else "no rows, 0 rows added"
    result.files = [FileResult(name, rows=appended.rows, bytes_in=source.size, seconds=seconds,
                               version=appended.version, skipped=skipped,
                               segments=appended.segments, bytes_written=appended.bytes,
                               off_curve=appended.off_curve)]
    result.created = target.recorded_here
    result.seconds = seconds
    return result


def _batches(reader: ipc.RecordBatchStreamReader, source: _Digesting, name: str,
             progress: Progress) -> Iterator[pa.RecordBatch]:
    """The stream's batches, each validated, with progress (bytes read, rows)."""
    rows = 0
    while True:
        try:
            batch = reader.read_next_batch()
            batch.validate(full=True)
        except StopIteration:
            return
        except (pa.ArrowException, OSError) as exc:
            raise IngestError(f"{name}: corrupt Arrow IPC data after {rows:,} rows: "
                              f"{_reason(exc)}") from None
        rows += batch.num_rows
        progress.update(source.size, rows)
        yield batch


def _landed(writer: Dataset, op_id: str, read_version: int) -> int | None:
    """After Ctrl-C in the commit: its version if it landed (None if not, or unknown)."""
    try:
        with interrupts_held():
            for commit in writer.history(after=read_version):
                if commit.id == op_id:
                    return commit.version
    except Exception:  # noqa: BLE001 - unknown: said as not committed
        return None
    return None


def _reason(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__

