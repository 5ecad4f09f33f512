"""The dataset object handed to DuckDB is a ``pyarrow.dataset.Dataset`` subclass whose C++ state
is never initialised: every public attribute works or raises a clear ColonnadeError, none
crashes the interpreter (an inherited ``partition_expression`` used to segfault)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from colonnade.errors import UnsupportedOperationError
from colonnade.store import Store

TOUCH_EVERYTHING = textwrap.dedent("""
    import sys
    import pyarrow.compute as pc
    import colonnade
    from colonnade.errors import ColonnadeError

    store = colonnade.connect(sys.argv[1])
    ds = store.arrow_dataset("t")
    arguments = {
        "count_rows": (), "filter": (pc.field("a") > 1,), "get_fragments": (), "head": (2,),
        "join": (ds, "a"), "join_asof": (ds, "a", "a", 1), "replace_schema": (ds.schema,),
        "scanner": (), "sort_by": ("a",), "take": ([0],), "to_batches": (), "to_table": (),
    }
    touched = []
    for name in dir(ds):
        if name.startswith("_"):
            continue
        try:
            value = getattr(ds, name)
            if callable(value) and name in arguments:
                result = value(*arguments[name])
                if name == "to_batches":
                    list(result)
        except ColonnadeError as exc:
            print(f"{name}: {type(exc).__name__}: {exc}")
        touched.append(name)
    for special in (repr, str, hash):
        special(ds)
    import pickle
    try:
        pickle.dumps(ds)
    except ColonnadeError as exc:
        print(f"pickle: {type(exc).__name__}")
    print("touched", " ".join(sorted(touched)))
    store.close()
""")


def test_every_public_attribute_can_be_touched(store: Store) -> None:
    store.create_dataset("t", pa.schema([("a", pa.int64())])).append(pa.table({"a": [1, 2, 3]}))
    result = subprocess.run([sys.executable, "-c", TOUCH_EVERYTHING, store.uri],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    touched = result.stdout.splitlines()[-1].split()[1:]
    import pyarrow.dataset as pds

    inherited = {n for n in dir(pds.Dataset) if not n.startswith("_")}
    assert inherited <= set(touched)
    unsupported = {line.split(":")[0] for line in result.stdout.splitlines()[:-1]}
    assert unsupported == {"get_fragments", "join", "join_asof", "replace_schema", "sort_by", "pickle"}
    assert "UnsupportedOperationError" in result.stdout and "Traceback" not in result.stderr


def test_filter_take_and_partition_expression_work(store: Store) -> None:
    store.create_dataset("t", pa.schema([("a", pa.int64())])).append(pa.table({"a": [1, 2, 3, 4]}))
    ds = store.arrow_dataset("t")
    assert ds.partition_expression.equals(pc.scalar(True))
    kept = ds.filter(pc.field("a") > 1).filter(pc.field("a") < 4)
    assert kept.to_table().column("a").to_pylist() == [2, 3]
    assert kept.count_rows() == 2
    assert ds.count_rows() == 4
    assert ds.take([0, 3]).column("a").to_pylist() == [1, 4]
    with pytest.raises(UnsupportedOperationError, match="get_fragments"):
        ds.get_fragments()
