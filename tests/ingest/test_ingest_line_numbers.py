"""Line numbers of bad rows across block boundaries, and the record-boundary finder itself.

Generated files mix quoted fields holding delimiters, doubled quotes and line breaks, stray
quotes in unquoted fields, blank lines, CRLF, and bad rows of every kind; they are read in
blocks far smaller than a record so that every kind of boundary is crossed. Every good row must
come out once, in order, with its value, and every bad row must be reported on its line.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

from colonnade.errors import BadRowError
from colonnade.ingest import Reject, open_source
from colonnade.ingest.records import Dialect, last_record_end, quoted_spans, record_ends

pytestmark = pytest.mark.unit

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("amount", pa.float64())])


@dataclass
class Generated:
    data: bytes
    good: list[tuple[int, str | None]] = field(default_factory=list)
    bad: list[tuple[int, str | None]] = field(default_factory=list)  # (line, column)


def generate(rng: random.Random, rows: int, crlf: bool) -> Generated:
    nl = b"\r\n" if crlf else b"\n"
    out = Generated(b"id,name,amount" + nl)
    parts = [out.data]
    line = 2
    for i in range(rows):
        kind = rng.choice(["plain", "plain", "quoted", "multiline", "doubled", "stray", "empty",
                           "blank", "bad_number", "bad_count", "bad_utf8", "bad_id"])
        if kind == "blank":
            parts.append(nl)
            line += 1
        name: bytes
        value: str | None
        if kind == "quoted":
            value = f"a,{i}"
            name = f'"{value}"'.encode()
        elif kind == "multiline":
            k = rng.randint(1, 3)
            value = "x" + "\n" * k + "y"  # a quoted line break is kept as the file has it
            if crlf:
                value = value.replace("\n", "\r\n")
            name = f'"{value}"'.encode()
        elif kind == "doubled":
            value = f'say "{i}"'
            name = b'"' + value.replace('"', '""').encode() + b'"'
        elif kind == "stray":
            value = f'5" pipe {i}'
            name = value.encode()
        elif kind == "empty":
            value, name = None, b""
        else:
            value = f"n{i}"
            name = value.encode()
        amount = f"{i}.5".encode()
        ident = str(i).encode()
        if kind == "bad_number":
            amount = b"oops"
            out.bad.append((line, "amount"))
        elif kind == "bad_count":
            amount += b",extra"
            out.bad.append((line, None))
        elif kind == "bad_utf8":
            name = b"caf\xe9"
            out.bad.append((line, "name"))
        elif kind == "bad_id":
            ident += b"x"
            out.bad.append((line, "id"))
        else:
            out.good.append((i, value))
        record = ident + b"," + name + b"," + amount
        parts.append(record + nl)
        line += 1 + record.count(b"\n")
    out.data = b"".join(parts)
    return out


def read_all(path: Path, block_size: int) -> tuple[pa.Table, list[Reject]]:
    rejects: list[Reject] = []
    with open_source(path, schema=SCHEMA, on_reject=rejects.append, block_size=block_size) as src:
        batches = [batch for batch, _ in src.read()]
    return pa.Table.from_batches(batches, schema=SCHEMA), rejects


@pytest.mark.parametrize("seed", range(12))
def test_good_rows_and_bad_lines_survive_every_block_boundary(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    gen = generate(rng, rows=rng.randint(50, 400), crlf=seed % 3 == 0)
    path = tmp_path / "g.csv"
    path.write_bytes(gen.data)
    for block_size in (rng.randint(16, 120), rng.randint(500, 3000), 1 << 20):
        table, rejects = read_all(path, block_size)
        assert list(zip(table.column("id").to_pylist(), table.column("name").to_pylist(),
                        strict=True)) == gen.good
        assert [(r.line, r.column) for r in rejects] == gen.bad
    if gen.bad:
        with open_source(path, schema=SCHEMA, block_size=97) as src, \
                pytest.raises(BadRowError) as info:
            for _ in src.read():
                pass
        assert (info.value.line, info.value.column) == gen.bad[0]


def test_a_clean_file_read_in_blocks_equals_pyarrow_reading_it_whole(tmp_path: Path) -> None:
    rng = random.Random(7)
    lines = ["id,name,amount"]
    for i in range(3000):
        name = rng.choice([f"n{i}", f'"a,{i}"', f'"x\n{i}"', f'"q""{i}"', ""])
        lines.append(f"{i},{name},{rng.random():.6f}")
    path = tmp_path / "c.csv"
    path.write_text("\n".join(lines) + "\n")
    whole = pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(
        column_types=SCHEMA, null_values=[""], strings_can_be_null=True))
    for block_size in (100, 4096, 65536):
        table, rejects = read_all(path, block_size)
        assert not rejects
        assert table.equals(whole)


def _reference_record_ends(data: bytes, delimiter: int = 0x2C, quote: int = 0x22) -> list[int]:
    """pyarrow's quoting rules, byte by byte: the newlines that end records."""
    ends, inside, field_start, i = [], False, True, 0
    while i < len(data):
        c = data[i]
        if inside:
            if c == quote:
                if i + 1 < len(data) and data[i + 1] == quote:
                    i += 1
                else:
                    inside = False
        elif c == quote and field_start:
            inside = True
        elif c == 0x0A:
            ends.append(i)
        field_start = not inside and c in (delimiter, 0x0A, 0x0D)
        i += 1
    return ends


@pytest.mark.parametrize("seed", range(30))
def test_record_ends_match_a_byte_by_byte_reference(seed: int) -> None:
    rng = random.Random(seed)
    alphabet = [b"a", b"b", b",", b'"', b"\n", b"\r\n", b'""']
    data = b"".join(rng.choice(alphabet) for _ in range(rng.randint(0, 300)))
    dialect = Dialect.of(",", '"')
    expected = _reference_record_ends(data)
    assert record_ends(data, dialect).tolist() == expected
    assert last_record_end(data, dialect) == (expected[-1] + 1 if expected else 0)


def test_parity_and_replay_agree_on_clean_quoting() -> None:
    data = b'1,"a,b"\n2,"x\ny"\n3,"say ""hi"""\n4,""\n'
    spans = quoted_spans(data, Dialect.of(",", '"'))
    assert record_ends(data, Dialect.of(",", '"'), spans).tolist() == _reference_record_ends(data)
    assert not spans.unterminated
    assert quoted_spans(b'1,"open\n', Dialect.of(",", '"')).unterminated


def test_no_quoting_means_every_newline_ends_a_record() -> None:
    data = b'1,"a\n2,b"\n'
    assert record_ends(data, Dialect.of(",", None)).tolist() == [4, 9]
    assert np.array_equal(record_ends(data, Dialect.of(",", '"')), [9])
