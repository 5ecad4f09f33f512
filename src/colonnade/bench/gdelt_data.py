"""Deterministic generator of GDELT-shaped event data.

The output mimics the GDELT 1.0 *historical backfile* event files (1979-2005 format, used
here for 1979-01-01 .. 1984-12-31): 57 TAB-separated columns, no header line, no quoting,
one event per line, events ordered by date with an increasing ``GLOBALEVENTID``.  The values
are synthetic but follow plausible skewed distributions (Zipf-like actors, places and CAMEO
event codes, geometric mention counts, many empty optional fields), so the data compresses,
dictionary-encodes and filters roughly like the real thing.

Reading the TSV back with pyarrow::

    import pyarrow.csv as pacsv

    pacsv.read_csv(
        path,
        read_options=pacsv.ReadOptions(column_names=GDELT_COLUMNS),
        parse_options=pacsv.ParseOptions(delimiter="\\t", quote_char=False),
        convert_options=pacsv.ConvertOptions(
            column_types=GDELT_SCHEMA, strings_can_be_null=True
        ),
    )

Empty fields are nulls: numeric columns always read empty fields as null; string columns
need ``strings_can_be_null=True`` (the generator never emits an empty *non-null* string, so
the round trip is exact).  Floats are written in plain shortest round-trip notation (values
are small, so no exponent form appears) and never as ``-0``.

Shape of the values: dates 1979-01-01 .. 1984-12-31 with ~1.5x more events each year (and
fewer on weekends); ``GLOBALEVENTID`` = row number + 1; actors drawn Zipf-like from ~6,700
fixed entries (countries, roles, country+role combinations, known groups, religious and
ethnic actors) with ~36% of Actor1 and ~50% of Actor2 empty (all ten fields null); CAMEO
event codes Zipf-like over 175 codes, with base/root codes as prefixes, ``QuadClass`` from
the root code and ``GoldsteinScale`` from a per-code table; geometric ``NumMentions`` >=
``NumArticles`` >= ``NumSources`` >= 1; ``AvgTone`` = 100 * (word difference) / words,
roughly N(-1, 4), 6 decimals; places from ~4,000 fixed entries (country, ADM1, city) mostly
inside the actor's country, ``*_Geo_Type`` 0 (no geo: the other six fields null) .. 5;
``DATEADDED`` is always 20130203, as in the backfile.

Determinism: the data is a pure function of ``(rows, seed)``.  Rows are produced in fixed
internal blocks of :data:`BLOCK_ROWS` rows, each with its own random stream derived from
``(seed, block index)``, so ``batch_rows`` only changes how the rows are sliced, never their
values.  Dates are assigned by inverse CDF over the row position, so they are sorted and
their distribution depends only on ``rows``.

Speed: the TSV is produced without Arrow's CSV writer; every vocabulary entry is formatted
once (with the same cast Arrow uses), and a row is a join of a dozen pre-formatted runs of
fields, so one core writes several hundred thousand rows per second.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from colonnade.bench.gdelt_vocab import FIRST_DATE, LAST_DATE, Vocab, vocab

__all__ = [
    "BLOCK_ROWS",
    "DATEADDED",
    "FIRST_DATE",
    "GDELT_COLUMNS",
    "GDELT_SCHEMA",
    "LAST_DATE",
    "convert_options",
    "generate",
    "iter_batches",
    "parse_options",
    "read_options",
    "schema_text",
]

# ---------------------------------------------------------------------------------------
# Schema
# ---------------------------------------------------------------------------------------

_S = pa.string()

_ACTOR_FIELDS = [
    ("Code", _S),
    ("Name", _S),
    ("CountryCode", _S),
    ("KnownGroupCode", _S),
    ("EthnicCode", _S),
    ("Religion1Code", _S),
    ("Religion2Code", _S),
    ("Type1Code", _S),
    ("Type2Code", _S),
    ("Type3Code", _S),
]

_GEO_FIELDS = [
    ("Type", pa.int32()),
    ("FullName", _S),
    ("CountryCode", _S),
    ("ADM1Code", _S),
    ("Lat", pa.float64()),
    ("Long", pa.float64()),
    ("FeatureID", _S),
]

GDELT_SCHEMA: pa.Schema = pa.schema(
    [
        ("GLOBALEVENTID", pa.int64()),
        ("SQLDATE", pa.int32()),
        ("MonthYear", pa.int32()),
        ("Year", pa.int16()),
        ("FractionDate", pa.float64()),
        *[(f"Actor1{n}", t) for n, t in _ACTOR_FIELDS],
        *[(f"Actor2{n}", t) for n, t in _ACTOR_FIELDS],
        ("IsRootEvent", pa.int8()),
        ("EventCode", _S),
        ("EventBaseCode", _S),
        ("EventRootCode", _S),
        ("QuadClass", pa.int32()),
        ("GoldsteinScale", pa.float64()),
        ("NumMentions", pa.int32()),
        ("NumSources", pa.int32()),
        ("NumArticles", pa.int32()),
        ("AvgTone", pa.float64()),
        *[(f"Actor1Geo_{n}", t) for n, t in _GEO_FIELDS],
        *[(f"Actor2Geo_{n}", t) for n, t in _GEO_FIELDS],
        *[(f"ActionGeo_{n}", t) for n, t in _GEO_FIELDS],
        ("DATEADDED", pa.int32()),
    ]
)

GDELT_COLUMNS: list[str] = list(GDELT_SCHEMA.names)
assert len(GDELT_COLUMNS) == 57, len(GDELT_COLUMNS)

_TYPE_SPELLING = {
    pa.int8(): "int8",
    pa.int16(): "int16",
    pa.int32(): "int32",
    pa.int64(): "int64",
    pa.float32(): "float32",
    pa.float64(): "float64",
    pa.string(): "string",
    pa.bool_(): "bool",
    pa.date32(): "date32",
}


def schema_text() -> str:
    """The schema as ``name:type`` lines (one per column, trailing newline)."""
    lines = []
    for field in GDELT_SCHEMA:
        if pa.types.is_timestamp(field.type):
            spelling = "timestamp"
        else:
            spelling = _TYPE_SPELLING[field.type]
        lines.append(f"{field.name}:{spelling}")
    return "\n".join(lines) + "\n"


def read_options(**kwargs: object) -> pacsv.ReadOptions:
    """``ReadOptions`` for the header-less TSV (extra keyword arguments are passed through)."""
    return pacsv.ReadOptions(column_names=GDELT_COLUMNS, **kwargs)


def parse_options() -> pacsv.ParseOptions:
    """``ParseOptions`` for the TSV: TAB delimiter, no quoting."""
    return pacsv.ParseOptions(delimiter="\t", quote_char=False)


def convert_options() -> pacsv.ConvertOptions:
    """``ConvertOptions`` giving exactly :data:`GDELT_SCHEMA`, empty fields as nulls."""
    return pacsv.ConvertOptions(column_types=GDELT_SCHEMA, strings_can_be_null=True)


# ---------------------------------------------------------------------------------------
# Constants
# ---------------------------------------------------------------------------------------

DATEADDED = 20130203  # the backfile was loaded on 2013-02-03
BLOCK_ROWS = 100_000  # fixed internal generation block; never depends on batch_rows

_P_ACTOR1_EMPTY = 0.36
_P_ACTOR2_EMPTY = 0.50

# ---------------------------------------------------------------------------------------
# Row generation
# ---------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Draws:
    """The random choices for one block; both the Arrow and the TSV output are built from it."""

    n: int
    event_id: np.ndarray  # int64
    day: np.ndarray  # index into the day tables
    a1: np.ndarray  # actor table index, 0 = empty
    a2: np.ndarray
    event: np.ndarray  # event table index
    is_root: np.ndarray  # int8 0/1
    mentions: np.ndarray  # int32
    sources: np.ndarray  # int32
    articles: np.ndarray  # int32
    tone: np.ndarray  # float64
    g1: np.ndarray  # place table index, 0 = no geo
    g2: np.ndarray
    ga: np.ndarray


def _pick_places(
    rng: np.random.Generator, v: Vocab, country: np.ndarray, present: np.ndarray
) -> np.ndarray:
    """Place index per row (0 = no geo): mostly inside the actor's country when it has one."""
    n = len(country)
    u_local = rng.random(n)
    u_glob = rng.random(n)
    u_home = rng.random(n)
    glob = v.places.draw(u_glob) + 1
    has_c = country >= 0
    c = np.where(has_c, country, 0)
    start = v.country_place_start[c]
    cnt = v.country_place_count[c]
    # 35% the country-level entry, otherwise a region/city skewed towards the first ones
    x = np.clip((u_local - 0.35) * (1.0 / 0.65), 0.0, 1.0) ** 2.2
    offset = np.where(u_local < 0.35, 0, 1 + (x * (cnt - 1)).astype(np.int64))
    local = start + np.minimum(offset, cnt - 1)
    place = np.where(has_c & (u_home < 0.75), local, glob)
    place[~present] = 0
    return place


def _draw_block(v: Vocab, seed: int, block: int, start: int, n: int, total: int) -> _Draws:
    rng = np.random.default_rng(np.random.SeedSequence([seed, block]))
    i = np.arange(start, start + n, dtype=np.int64)

    # dates: inverse CDF of the row position -> sorted, denser in later years
    day = np.minimum(
        np.searchsorted(v.day_cdf, (i + 0.5) / total, side="right"), len(v.day_cdf) - 1
    )

    # actors (0 = empty)
    a1 = v.actors.draw(rng.random(n)) + 1
    a1[rng.random(n) < _P_ACTOR1_EMPTY] = 0
    a2 = v.actors.draw(rng.random(n)) + 1
    a2[rng.random(n) < _P_ACTOR2_EMPTY] = 0

    # event
    event = v.events.draw(rng.random(n))
    is_root = (rng.random(n) < 0.45).astype(np.int8)

    # counts: small, geometric, with a rare heavy tail; 1 <= sources <= articles <= mentions
    mentions = rng.geometric(0.35, n)
    burst = rng.random(n) < 0.01
    mentions[burst] *= rng.integers(2, 40, int(burst.sum()))
    articles = np.where(rng.random(n) < 0.8, mentions, np.minimum(mentions, rng.geometric(0.5, n)))
    sources = np.minimum(articles, rng.geometric(0.75, n))

    # tone: 100 * (positive - negative words) / words, like GDELT, rounded to 6 places
    words = rng.integers(40, 1500, n)
    diff = np.rint(rng.normal(-1.0, 4.0, n) * words / 100.0)
    tone = np.clip(np.round(100.0 * diff / words, 6), -25.0, 25.0) + 0.0  # + 0.0: no "-0"

    # geography, correlated with the actors' countries
    c1 = v.actor_country[a1]
    c2 = v.actor_country[a2]
    g1 = _pick_places(rng, v, c1, (a1 > 0) & (rng.random(n) < 0.85))
    g2 = _pick_places(rng, v, c2, (a2 > 0) & (rng.random(n) < 0.80))
    ga_base = _pick_places(rng, v, np.where(c1 >= 0, c1, c2), rng.random(n) < 0.93)
    r = rng.random(n)
    ga = np.where((r < 0.5) & (g1 > 0), g1, np.where((r < 0.7) & (g2 > 0), g2, ga_base))

    return _Draws(
        n=n,
        event_id=i + 1,
        day=day,
        a1=a1,
        a2=a2,
        event=event,
        is_root=is_root,
        mentions=mentions.astype(np.int32),
        sources=sources.astype(np.int32),
        articles=articles.astype(np.int32),
        tone=tone,
        g1=g1,
        g2=g2,
        ga=ga,
    )


def _typed_batch(v: Vocab, d: _Draws) -> pa.RecordBatch:
    day, a1, a2, ev = pa.array(d.day), pa.array(d.a1), pa.array(d.a2), pa.array(d.event)
    g1, g2, ga = pa.array(d.g1), pa.array(d.g2), pa.array(d.ga)
    cols: list[pa.Array] = [
        pa.array(d.event_id, type=pa.int64()),
        *[c.take(day) for c in v.day_cols],
        *[c.take(a1) for c in v.actor_cols],
        *[c.take(a2) for c in v.actor_cols],
        pa.array(d.is_root, type=pa.int8()),
        *[c.take(ev) for c in v.event_cols],
        pa.array(d.mentions, type=pa.int32()),
        pa.array(d.sources, type=pa.int32()),
        pa.array(d.articles, type=pa.int32()),
        pa.array(d.tone, type=pa.float64()),
        *[c.take(g1) for c in v.place_cols],
        *[c.take(g2) for c in v.place_cols],
        *[c.take(ga) for c in v.place_cols],
        pa.array(np.full(d.n, DATEADDED, dtype=np.int32), type=pa.int32()),
    ]
    return pa.RecordBatch.from_arrays(cols, schema=GDELT_SCHEMA)


# -- TSV text ----------------------------------------------------------------------------
#
# Arrow's CSV writer formats values with a cast to string, so the text path does the same
# cast once per vocabulary entry and stores whole runs of fields ("SQLDATE\tMonthYear\t...")
# as one string per entry.  A row is then a join of a dozen strings, and the joined array's
# data buffer is exactly the file content (the last run ends with "\n").


def _text(arr: pa.Array) -> pa.Array:
    return arr if pa.types.is_string(arr.type) else pc.cast(arr, pa.string())


def _join(cols: list[pa.Array]) -> pa.Array:
    return pc.binary_join_element_wise(
        *[_text(c) for c in cols], "\t", null_handling="replace", null_replacement=""
    )


class _TextVocab:
    def __init__(self, v: Vocab) -> None:
        self.day = _join(v.day_cols)
        self.actor = _join(v.actor_cols)
        self.event = _join(v.event_cols)
        self.place = _join(v.place_cols)
        self.place_eol = pc.binary_join_element_wise(self.place, pa.scalar(f"{DATEADDED}\n"), "\t")
        self.bit = pa.array(["0", "1"])


@lru_cache(maxsize=1)
def _text_vocab() -> _TextVocab:
    return _TextVocab(vocab())


def _text_block(t: _TextVocab, d: _Draws) -> tuple[pa.Buffer, np.ndarray]:
    """The TSV bytes of a block and the byte offset of each row start (n + 1 entries)."""
    rows = pc.binary_join_element_wise(
        pc.cast(pa.array(d.event_id), pa.string()),
        t.day.take(pa.array(d.day)),
        t.actor.take(pa.array(d.a1)),
        t.actor.take(pa.array(d.a2)),
        t.bit.take(pa.array(d.is_root)),
        t.event.take(pa.array(d.event)),
        pc.cast(pa.array(d.mentions), pa.string()),
        pc.cast(pa.array(d.sources), pa.string()),
        pc.cast(pa.array(d.articles), pa.string()),
        pc.cast(pa.array(d.tone), pa.string()),
        t.place.take(pa.array(d.g1)),
        t.place.take(pa.array(d.g2)),
        t.place_eol.take(pa.array(d.ga)),
        "\t",
    )
    _validity, offsets_buf, data = rows.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=np.int32)[rows.offset : rows.offset + d.n + 1]
    return data, offsets.astype(np.int64)


# ---------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------


def _iter_draws(rows: int, seed: int) -> Iterator[tuple[int, _Draws]]:
    if rows < 0:
        raise ValueError(f"rows must be >= 0, got {rows}")
    if seed < 0:
        raise ValueError(f"seed must be >= 0, got {seed}")
    v = vocab()
    for block, start in enumerate(range(0, rows, BLOCK_ROWS)):
        yield start, _draw_block(v, seed, block, start, min(BLOCK_ROWS, rows - start), rows)


def iter_batches(rows: int, seed: int = 42, batch_rows: int = 100_000) -> Iterator[pa.RecordBatch]:
    """Yield the data set as record batches of ``batch_rows`` rows (the last may be shorter).

    The values depend only on ``(rows, seed)``; ``batch_rows`` just controls the slicing.
    The batches hold exactly what reading the TSV written by :func:`generate` gives.
    """
    if batch_rows <= 0:
        raise ValueError(f"batch_rows must be > 0, got {batch_rows}")
    v = vocab()
    pending: list[pa.RecordBatch] = []
    buffered = 0
    for _start, d in _iter_draws(rows, seed):
        blk = _typed_batch(v, d)
        if not pending and len(blk) == batch_rows:
            yield blk
            continue
        pending.append(blk)
        buffered += len(blk)
        while buffered >= batch_rows:
            merged = pa.concat_batches(pending) if len(pending) > 1 else pending[0]
            yield merged.slice(0, batch_rows)
            rest = merged.slice(batch_rows)
            pending = [rest] if len(rest) else []
            buffered = len(rest)
    if buffered:
        yield pa.concat_batches(pending) if len(pending) > 1 else pending[0]


def generate(
    path: str | os.PathLike[str],
    rows: int,
    seed: int = 42,
    batch_rows: int = 100_000,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Write ``rows`` GDELT-shaped events as header-less TSV to ``path``; return bytes written.

    Streams block by block (memory stays bounded by one block of :data:`BLOCK_ROWS` rows),
    writing in pieces of ``batch_rows`` rows; ``progress`` is called after each piece with
    the cumulative number of rows written.  ``batch_rows`` never changes the content.
    """
    if batch_rows <= 0:
        raise ValueError(f"batch_rows must be > 0, got {batch_rows}")
    written = 0
    with open(path, "wb") as f:
        if rows == 0:
            return 0
        t = _text_vocab()
        for start, d in _iter_draws(rows, seed):
            data, offsets = _text_block(t, d)
            view = memoryview(data)
            end = start + d.n
            cuts = list(range((start // batch_rows + 1) * batch_rows, end, batch_rows))
            prev = 0
            for cut in [c - start for c in cuts] + [d.n]:
                written += f.write(view[offsets[prev] : offsets[cut]])
                prev = cut
                done = start + cut
                if progress is not None and (done % batch_rows == 0 or done == rows):
                    progress(done)
    return written
