"""Conflict rules of the commit protocol (Delta's WriteSerializable, kept small).

Every operation declares what it read (:class:`ReadSet`): the version it read, the segments it
removes, the partitions it read (none for a blind append, a set of partition keys, or the whole
table) and whether it changes the schema. Before its commit is written, and again each time
another writer takes the version it tried, every commit made since the version it read is
checked against it (:func:`check_conflicts`):

* a concurrent commit removed a segment this operation removes (two compactions, or a delete
  and a compaction, rewrote the same segment: the second would resurrect or duplicate rows);
* this operation read partitions (overwrite, delete) and a concurrent commit added segments with
  new rows to one of them (its answer was computed without those rows); a compaction adds no
  new rows, so its segments don't count;
* both change the schema;
* both record the position of the same stream partition (two stream processes consumed the
  same Kafka partition, e.g. one that lost it in a rebalance and did not know yet: committing
  both would store those events twice).

A blind append reads nothing and removes nothing: it never conflicts with an append or a
compaction. A conflict is :class:`~colonnade.errors.CommitConflictError` naming the dataset, the
winning version, its operation and the reason; nothing of the losing operation is committed
(its segments are orphans for ``vacuum``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from colonnade.errors import CommitConflictError
from colonnade.table.commits import Commit

#: Operations that rewrite rows without changing them: their added segments hold no new rows.
DATA_PRESERVING = frozenset({"compact"})


@dataclass(frozen=True)
class ReadSet:
    """What an operation read before it wrote (see the module docstring)."""

    read_version: int
    removes: frozenset[str] = frozenset()
    partitions: frozenset[str] = frozenset()  # partition keys read (when not the whole table)
    whole_table: bool = False
    changes_schema: bool = False
    schema: tuple[tuple[str, str], ...] | None = None  # the schema as read (None: none recorded)
    positions: frozenset[str] = frozenset()  # stream positions (app ids) read and advanced
    #: the operation rewrites state derived from the whole version it read (a sample's
    #: maintenance): any commit made since conflicts
    exclusive: bool = False

    @classmethod
    def blind(cls, read_version: int) -> ReadSet:
        """An append: reads nothing, removes nothing."""
        return cls(read_version)

    def reads(self, partition: str) -> bool:
        return self.whole_table or partition in self.partitions


def schema_key(schema: list[list[str]] | None) -> tuple[tuple[str, str], ...] | None:
    """A recorded schema (``[[name, type], ...]``) as a comparable value."""
    return None if schema is None else tuple((str(n), str(t)) for n, t in schema)


def conflict_reason(mine: ReadSet, operation: str, winner: Commit) -> str | None:
    """Why ``winner`` (committed after ``mine.read_version``) conflicts with the operation that
    declared ``mine``, or None if it doesn't."""
    if mine.exclusive:
        return f"this {operation} rewrites what it read, and it committed since"
    removed = set(winner.removed) & mine.removes
    if removed:
        some = sorted(removed)[0]
        more = f" and {len(removed) - 1} more" if len(removed) > 1 else ""
        return f"it removed segment {some}{more}, which this {operation} removes too"
    if (mine.whole_table or mine.partitions) and winner.kind not in DATA_PRESERVING:
        touched = sorted({s.partition for s in winner.added if mine.reads(s.partition)})
        if touched:
            where = "the table" if touched == [""] else "partition " + ", ".join(touched[:3]) + \
                (f" and {len(touched) - 3} more" if len(touched) > 3 else "")
            return f"it added rows to {where}, which this {operation} read"
    if mine.changes_schema and winner.schema is not None and schema_key(winner.schema) != mine.schema:
        return f"it changed the schema, which this {operation} changes too"
    if mine.positions:
        moved = sorted(set(winner.positions) & mine.positions)
        if moved:
            return (f"it advanced stream position {moved[0]} to {winner.positions[moved[0]]}, "
                    f"which this {operation} advances from where it read it")
    return None


def check_conflicts(dataset: str, mine: ReadSet, operation: str, winners: Iterable[Commit]) -> None:
    """Raise CommitConflictError for the first of ``winners`` (commits newer than
    ``mine.read_version``, in version order) that conflicts with this operation. An operation
    that read or removes anything conflicts too when the commits after the version it read were
    expired meanwhile (they can't be checked)."""
    winners = [w for w in winners if w.version > mine.read_version]
    blind = not (mine.removes or mine.partitions or mine.whole_table or mine.changes_schema
                 or mine.positions or mine.exclusive)
    if winners and winners[0].version > mine.read_version + 1 and not blind:
        raise CommitConflictError(dataset, winners[0].version, operation=winners[0].kind,
                                  reason=f"the versions after {mine.read_version}, which this {operation} "
                                         "read, were expired meanwhile")
    for winner in winners:
        if winner.version <= mine.read_version:
            continue
        reason = conflict_reason(mine, operation, winner)
        if reason is not None:
            raise CommitConflictError(dataset, winner.version, operation=winner.kind, reason=reason)
