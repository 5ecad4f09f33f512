"""Decoding a poll of Kafka messages: the whole poll at once, bad messages found and named."""

from __future__ import annotations

import io
import json

import fastavro
import pyarrow as pa
import pytest

from colonnade.stream.decode import DecodeError, Decoder, avro_schema
from colonnade.stream.options import StreamError, parse_columns

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("geo", pa.string()), ("bid", pa.float64())])


def _json(i: int, **extra: object) -> bytes:
    return json.dumps({"id": i, "geo": f"G{i % 3}", "bid": i / 2, **extra}).encode()


def test_a_clean_json_poll_is_one_batch_in_message_order() -> None:
    d = Decoder("json", SCHEMA).decode([_json(i) for i in range(1000)])
    assert d.bad == []
    assert d.batch is not None and d.batch.num_rows == 1000
    assert d.batch.column("id").to_pylist() == list(range(1000))
    assert d.good.tolist() == list(range(1000))
    assert [(f.name, f.type) for f in d.batch.schema] == [(f.name, f.type) for f in SCHEMA]


def test_bad_json_messages_are_each_named_with_a_reason_and_the_rest_kept() -> None:
    payloads = [_json(i) for i in range(200)]
    payloads[3] = b"{not json"
    payloads[50] = b'{"id": 50, "bid": "high"}'  # wrong type
    payloads[51] = b'{"geo": "x"}'  # required id absent
    payloads[52] = b'{"id": null}'  # required id null
    payloads[120] = b'{"id": 1, "geo": "\xff\xfe"}'  # not UTF-8
    payloads[121] = b""
    payloads[122] = None  # type: ignore[call-overload]
    payloads[150] = b'{"id": 1} {"id": 2}'  # two records in one message
    payloads[160] = b"[1, 2]"
    d = Decoder("json", SCHEMA).decode(payloads)
    reasons = {b.index: b.reason for b in d.bad}
    assert sorted(reasons) == [3, 50, 51, 52, 120, 121, 122, 150, 160]
    assert "not valid JSON" in reasons[3]
    assert "bid" in reasons[50]
    assert reasons[51] == "required column id is missing" and reasons[52] == "required column id is null"
    assert "UTF-8" in reasons[120]
    assert reasons[121] == reasons[122] == "empty message"
    assert "2 records" in reasons[150]
    assert d.batch is not None and d.batch.num_rows == 200 - 9
    assert sorted(set(range(200)) - set(d.good.tolist())) == sorted(reasons)
    assert d.batch.column("id").to_pylist() == d.good.tolist()  # rows line up with their messages


def test_csv_records_with_a_required_empty_field_and_a_wrong_field_count() -> None:
    payloads = [b"%d,G%d,%d.5" % (i, i % 3, i) for i in range(100)]
    payloads[10] = b",G1,1.0"  # required id empty
    payloads[20] = b"20,G2"  # a field short
    payloads[30] = b"x,G2,1.0"  # not an integer
    payloads[40] = b'40,"G\n2",1.0'  # a quoted newline is a value, not a second record
    d = Decoder("csv", SCHEMA).decode(payloads)
    reasons = {b.index: b.reason for b in d.bad}
    assert sorted(reasons) == [10, 20, 30]
    assert "required column id" in reasons[10]
    assert "Expected 3 columns" in reasons[20]
    assert "column id" in reasons[30]
    assert d.batch is not None and d.batch.num_rows == 97
    assert "G\n2" in d.batch.column("geo").to_pylist()


def test_avro_messages_of_the_columns_record_schema() -> None:
    parsed = fastavro.parse_schema(avro_schema(SCHEMA))

    def encode(record: dict[str, object]) -> bytes:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, record)
        return buf.getvalue()

    payloads = [encode({"id": i, "geo": None if i == 2 else f"G{i}", "bid": i * 1.5}) for i in range(5)]
    payloads.append(b"\x01")  # truncated
    payloads.append(payloads[0] + b"junk")  # trailing bytes
    d = Decoder("avro", SCHEMA).decode(payloads)
    assert [b.index for b in d.bad] == [5, 6]
    assert d.batch is not None
    assert d.batch.to_pylist()[2] == {"id": 2, "geo": None, "bid": 3.0}


def test_avro_refuses_a_type_it_cannot_carry() -> None:
    with pytest.raises(DecodeError, match="list"):
        Decoder("avro", pa.schema([("xs", pa.list_(pa.int64()))]))


def test_columns_parse_with_required_markers_and_errors_are_one_line() -> None:
    schema = parse_columns("id:int64 not null, geo:string\nbid: double")
    assert schema.names == ["id", "geo", "bid"]
    assert [f.nullable for f in schema] == [False, True, True]
    with pytest.raises(StreamError, match="expected 'name:type'"):
        parse_columns("id")
