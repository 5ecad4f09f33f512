"""The tables of a Colonnade keyspace and the CQL statements the Cassandra store runs on them
(prepared once per connection). Layout and guarantees: :mod:`colonnade.storage.cassandra`."""

TABLES = {
    "datasets": "(name text PRIMARY KEY, spec text, created timestamp)",
    "dataset_names": "(folded text PRIMARY KEY, name text)",
    "commits": "(dataset text, version bigint, payload blob, at timestamp,"
               " PRIMARY KEY ((dataset), version)) WITH CLUSTERING ORDER BY (version ASC)",
    "checkpoints": "(dataset text, version bigint, part int, parts int, payload blob,"
                   " PRIMARY KEY ((dataset), version, part))",
    "log_bounds": "(dataset text PRIMARY KEY, oldest bigint)",
    "partitions": "(dataset text, partition text, PRIMARY KEY ((dataset), partition))",
    "segments": "(dataset text, partition text, segment text, commit text, rows bigint,"
                " bucket int, stats blob, PRIMARY KEY ((dataset, partition), segment))",
    # One Cassandra partition per bucket of a dataset partition, holding every column of its
    # segments, each column one contiguous slice: a scan of all columns asks for one partition
    # per bucket, not one per column (Cassandra's cost is mostly per partition read). Chunks
    # are compressed already: SSTable compression would only burn CPU on every read.
    "slice_chunks": "(dataset text, partition text, bucket int, column text, segment text, part int,"
                    " parts int, data blob, PRIMARY KEY ((dataset, partition, bucket), column, segment, part))"
                    " WITH compression = {'enabled': 'false'}",
    "chunk_index": "(dataset text, partition text, column text, bucket int, segment text,"
                   " bytes bigint, PRIMARY KEY ((dataset, partition), column, bucket, segment))",
}

SLICE_CHUNKS = "slice_chunks"

#: The chunks table of keyspaces written before ``slice_chunks``: one Cassandra partition per
#: column of each bucket. Such a keyspace keeps it (and is read and written as it is).
LEGACY_CHUNKS = ("chunks", "(dataset text, partition text, column text, bucket int, segment text, part int,"
                 " parts int, data blob, PRIMARY KEY ((dataset, partition, column, bucket), segment, part))"
                 " WITH compression = {'enabled': 'false'}")


STATEMENTS = {  # name: CQL; LWTs are not idempotent (see IdempotentRetryPolicy)
    "create": "INSERT INTO {ks}.datasets (name, spec, created) VALUES (?, ?, ?) IF NOT EXISTS",
    "get": "SELECT spec FROM {ks}.datasets WHERE name = ?",
    "update": "UPDATE {ks}.datasets SET spec = ? WHERE name = ? IF EXISTS",
    "names": "SELECT name FROM {ks}.datasets",
    "undataset": "DELETE FROM {ks}.datasets WHERE name = ? IF EXISTS",
    "claim": "INSERT INTO {ks}.dataset_names (folded, name) VALUES (?, ?) IF NOT EXISTS",
    "unclaim": "DELETE FROM {ks}.dataset_names WHERE folded = ? IF name = ?",
    "commit": "INSERT INTO {ks}.commits (dataset, version, payload, at) VALUES (?, ?, ?, ?)"
              " IF NOT EXISTS",
    "commits": "SELECT version, payload FROM {ks}.commits WHERE dataset = ? AND version > ?"
               " AND version <= ?",
    # a commit's mark: when its payload was written (an LWT's ballot time, in microseconds)
    "commits_marked": "SELECT version, payload, writetime(payload) FROM {ks}.commits WHERE dataset = ?"
                      " AND version > ? AND version <= ?",
    "commit_mark": "SELECT writetime(payload) FROM {ks}.commits WHERE dataset = ? AND version = ?",
    "latest": "SELECT version FROM {ks}.commits WHERE dataset = ? ORDER BY version DESC LIMIT 1",
    "uncommits": "DELETE FROM {ks}.commits WHERE dataset = ?",
    # the payload only: the row stays, so INSERT ... IF NOT EXISTS keeps refusing the version
    "expire_commit": "DELETE payload FROM {ks}.commits WHERE dataset = ? AND version = ?",
    "oldest": "SELECT oldest FROM {ks}.log_bounds WHERE dataset = ?",
    "oldest_first": "INSERT INTO {ks}.log_bounds (dataset, oldest) VALUES (?, ?) IF NOT EXISTS",
    "oldest_raise": "UPDATE {ks}.log_bounds SET oldest = ? WHERE dataset = ? IF oldest = ?",
    "unbounds": "DELETE FROM {ks}.log_bounds WHERE dataset = ?",
    "uncheckpoint": "DELETE FROM {ks}.checkpoints WHERE dataset = ? AND version = ?",
    "checkpoint_trim": "DELETE FROM {ks}.checkpoints WHERE dataset = ? AND version = ? AND part >= ?",
    "checkpoint": "INSERT INTO {ks}.checkpoints (dataset, version, part, parts, payload)"
                  " VALUES (?, ?, ?, ?, ?)",
    "checkpoints": "SELECT version, part, parts FROM {ks}.checkpoints WHERE dataset = ?",
    "checkpoint_parts": "SELECT part, parts, payload FROM {ks}.checkpoints WHERE dataset = ?"
                        " AND version = ?",
    "uncheckpoints": "DELETE FROM {ks}.checkpoints WHERE dataset = ?",
    "partition": "INSERT INTO {ks}.partitions (dataset, partition) VALUES (?, ?)",
    "partitions": "SELECT partition FROM {ks}.partitions WHERE dataset = ?",
    "unpartitions": "DELETE FROM {ks}.partitions WHERE dataset = ?",
    "segment": "INSERT INTO {ks}.segments (dataset, partition, segment, commit, rows, bucket, stats)"
               " VALUES (?, ?, ?, ?, ?, ?, ?)",
    "segments": "SELECT partition, segment, commit, rows, bucket, stats FROM {ks}.segments"
                " WHERE dataset = ? AND partition IN ?",
    "unsegment": "DELETE FROM {ks}.segments WHERE dataset = ? AND partition = ? AND segment = ?",
    "unsegments": "DELETE FROM {ks}.segments WHERE dataset = ? AND partition = ?",
    "chunk": "INSERT INTO {ks}.{chunks} (dataset, partition, column, bucket, segment, part, parts, data)"
             " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
    "chunks": "SELECT column, segment, part, parts, data FROM {ks}.{chunks} WHERE dataset = ? AND partition IN ?"
              " AND column IN ? AND bucket = ? AND segment IN ?",
    "unchunk": "DELETE FROM {ks}.{chunks} WHERE dataset = ? AND partition = ? AND column = ?"
               " AND bucket = ? AND segment = ?",
    "unchunks": "DELETE FROM {ks}.{chunks} WHERE dataset = ? AND partition = ? AND column = ?"
                " AND bucket = ?",
    "index": "INSERT INTO {ks}.chunk_index (dataset, partition, column, bucket, segment, bytes)"
             " VALUES (?, ?, ?, ?, ?, ?)",
    "indexes": "SELECT column, bucket, bytes FROM {ks}.chunk_index WHERE dataset = ? AND partition = ?",
    "unindex": "DELETE FROM {ks}.chunk_index WHERE dataset = ? AND partition = ? AND column = ?"
               " AND bucket = ? AND segment = ?",
    "unindexes": "DELETE FROM {ks}.chunk_index WHERE dataset = ? AND partition = ?",
}
