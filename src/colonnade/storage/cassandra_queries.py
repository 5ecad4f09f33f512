"""Which chunk queries read a set of chunks from the Cassandra store: the wanted cells of a
chunk slice (the chunks of one bucket of one partition value) asked for in as few queries as
Cassandra answers well, and on a cluster of several nodes only slices of the same replicas in
one query, which is then sent to them."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence

from colonnade.storage.base import ChunkRef
from colonnade.storage.cassandra_driver import ChunkQuery

IN_SEGMENTS = 256  # segments per `segment IN ?` query
IN_PARTITIONS = 32  # partitions per `partition IN ?` query
SLICE_CELLS = 32  # wanted cells up to which the queries of several slices become one

Replicas = Callable[[str, str, int], tuple[str, ...]]
"""The replicas of the Cassandra partition holding a chunk: (partition, column, bucket) →
addresses (empty on one node)."""


def slice_queries(refs: Sequence[ChunkRef], replicas: Replicas) -> deque[ChunkQuery]:
    """The queries for ``refs`` in ``slice_chunks`` (one Cassandra partition per slice, every
    column of it): one per slice for its wanted columns and segments, split by column past
    IN_PRODUCT; the slices of a few wanted cells (a scan of a column or two over many small
    partitions) are asked for together, up to SLICE_CELLS cells and IN_PARTITIONS slices."""
    slices: dict[tuple[int, str], dict[tuple[str, str], list[ChunkRef]]] = {}
    for ref in refs:
        slices.setdefault((ref.bucket, ref.partition), {}).setdefault((ref.column, ref.segment), []).append(ref)
    hosts = {key: replicas(key[1], "", key[0]) for key in slices}  # the column is not in the key
    out: deque[ChunkQuery] = deque()
    open_query: dict[tuple[int, tuple[str, ...], tuple[str, ...]], ChunkQuery] = {}
    for key in sorted(slices, key=lambda k: (k[0], hosts[k], k[1])):
        bucket, partition = key
        by_column: dict[str, dict[tuple[str, str], list[ChunkRef]]] = {}
        for cell, seg_refs in slices[key].items():
            by_column.setdefault(cell[0], {})[cell] = seg_refs
        segments = len({segment for _, segment in slices[key]})
        columns = sorted(by_column)
        step = max(1, IN_PRODUCT // segments)  # Cassandra looks up each column and segment
        for i in range(0, len(columns), step):
            group = tuple(columns[i:i + step])
            wanted = {cell: v for c in group for cell, v in by_column[c].items()}
            query = open_query.get((bucket, hosts[key], group))
            if query is not None:
                partitions = query.key[0]
                if (len(query.wanted) + len(wanted) > SLICE_CELLS or len(partitions) >= IN_PARTITIONS
                        or (len(partitions) + 1) * len(group) * (len(query.segments) + segments) > IN_PRODUCT):
                    query = None
            if query is None:
                open_query[(bucket, hosts[key], group)] = query = ChunkQuery(((partition,), group, bucket), wanted)
                out.append(query)
            else:
                query.key = ((*query.key[0], partition), group, bucket)
                query.wanted.update(wanted)
    return out


def column_queries(refs: Sequence[ChunkRef], replicas: Replicas) -> deque[ChunkQuery]:
    """The queries for ``refs`` in a legacy ``chunks`` table (one Cassandra partition per
    column of a slice)."""
    # One query per column and bucket for the wanted segments of up to IN_PARTITIONS
    # partitions (segment ids are unique, so rows are matched by column and segment): a
    # scan of many small partitions costs a few queries per column, not one per chunk. The
    # queries of a few segments (a point lookup's) ask for all their columns at once.
    groups: dict[tuple[str, int], dict[str, dict[str, list[ChunkRef]]]] = {}
    for ref in refs:
        by_partition = groups.setdefault((ref.column, ref.bucket), {})
        by_partition.setdefault(ref.partition, {}).setdefault(ref.segment, []).append(ref)
    tasks: list[tuple[tuple[str, ...], str, int, dict[str, list[ChunkRef]]]] = []
    for (column, bucket), by_partition in groups.items():
        batch: dict[str, list[ChunkRef]] = {}
        partitions: list[str] = []
        hosts = {p: replicas(p, column, bucket) for p in by_partition}
        for partition in sorted(by_partition, key=lambda p: (hosts[p], p)):
            wanted = by_partition[partition]
            if batch and (len(partitions) >= IN_PARTITIONS or hosts[partition] != hosts[partitions[-1]]
                          or (len(partitions) + 1) * (len(batch) + len(wanted)) > IN_PRODUCT):
                tasks.append((tuple(partitions), column, bucket, batch))
                batch, partitions = {}, []
            for segment, seg_refs in wanted.items():
                batch[segment] = seg_refs
                if len(batch) >= IN_SEGMENTS:
                    tasks.append((tuple(partitions + [partition]), column, bucket, batch))
                    batch, partitions = {}, []
            if batch and (not partitions or partitions[-1] != partition):
                partitions.append(partition)
        if batch:
            tasks.append((tuple(partitions), column, bucket, batch))
    return merged_queries(tasks)


IN_PRODUCT = 2048  # partitions x segments a chunk query may name (Cassandra looks up each pair)

#: Segments a chunk query may name for its columns to be asked for together (one request
#: for a point lookup's chunks instead of one per column; a scan's queries stay per column,
#: so that their pages are sized per column and read in parallel).
MERGE_SEGMENTS = 4


def merged_queries(tasks: list[tuple[tuple[str, ...], str, int, dict[str, list[ChunkRef]]]]) -> deque[ChunkQuery]:
    """The chunk queries of ``tasks`` (partitions, column, bucket, wanted refs by segment):
    those of a few segments that name the same partitions, bucket and segments become one."""
    out: deque[ChunkQuery] = deque()
    together: dict[tuple[tuple[str, ...], int, tuple[str, ...]], ChunkQuery] = {}
    for partitions, column, bucket, batch in tasks:
        wanted = {(column, segment): seg_refs for segment, seg_refs in batch.items()}
        if len(batch) > MERGE_SEGMENTS:
            out.append(ChunkQuery((partitions, (column,), bucket), wanted))
            continue
        key = (partitions, bucket, tuple(sorted(batch)))
        query = together.get(key)
        if query is not None and len(partitions) * (len(query.key[1]) + 1) * len(batch) > IN_PRODUCT:
            query = None  # Cassandra looks up each partition and segment of each column: a new query
        if query is None:
            together[key] = query = ChunkQuery((partitions, (column,), bucket), wanted)
            out.append(query)
        else:
            query.key = (partitions, (*query.key[1], column), bucket)
            query.wanted.update(wanted)
    return out
