"""The public Python API: the README's "Python API quick start" runs as written, and the names
``colonnade`` exports are the ones it documents."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import colonnade

pytestmark = pytest.mark.unit

README = Path(__file__).resolve().parent.parent / "README.md"
HEADING = "## Python API quick start"


def quick_start_code() -> str:
    """The first ```python block after the heading, before the next ``## `` heading."""
    text = README.read_text(encoding="utf-8")
    assert HEADING in text, f"README.md has no {HEADING!r} section"
    section = text.split(HEADING, 1)[1]
    section = re.split(r"^## ", section, maxsplit=1, flags=re.MULTILINE)[0]
    match = re.search(r"^```python\n(.*?)^```", section, flags=re.MULTILINE | re.DOTALL)
    assert match, f"the {HEADING!r} section of README.md has no ```python block"
    return match.group(1)


def test_readme_python_quick_start_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code = quick_start_code()
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("COLONNADE_STORE", raising=False)
    namespace: dict[str, object] = {"__name__": "readme_quick_start"}
    exec(compile(code, f"{README}:{HEADING}", "exec"), namespace)  # noqa: S102 - documentation under test
    # it wrote its store where it was run, and nowhere else
    created = sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(("-wal", "-shm")))
    assert created and all(name.endswith(".db") for name in created), created
    # and what it shows is what the store now holds
    with colonnade.connect(str(tmp_path / created[0])) as store:
        assert store.datasets() == ["trips"]
        assert store.dataset("trips").version == 2
        answer = store.sql("SELECT city, sum(fare) AS total FROM trips GROUP BY city ORDER BY city")
        assert answer.to_pylist() == [{"city": "Lyon", "total": 20.5}, {"city": "Nantes", "total": 23.25},
                                      {"city": "Paris", "total": 40.5}]


def test_public_names_are_the_objects_the_api_hands_out(tmp_path: Path) -> None:
    import pyarrow as pa

    assert sorted(colonnade.__all__) == sorted(
        ["AppendResult", "ColonnadeError", "Dataset", "DatasetSpec", "Explain", "Scan", "Store",
         "__version__", "connect"])
    namespace: dict[str, object] = {}
    exec("from colonnade import *", namespace)  # noqa: S102 - what `import *` gives
    assert set(colonnade.__all__) <= set(namespace)
    with colonnade.connect(str(tmp_path / "api.db")) as store:
        assert isinstance(store, colonnade.Store)
        ds = store.create_dataset("t", pa.schema([("id", pa.int64())]))
        assert isinstance(ds, colonnade.Dataset) and isinstance(ds.spec, colonnade.DatasetSpec)
        assert isinstance(ds.append(pa.table({"id": [1, 2]})), colonnade.AppendResult)
        assert isinstance(ds.scan(), colonnade.Scan)
        assert isinstance(store.explain("SELECT * FROM t"), colonnade.Explain)
        with pytest.raises(colonnade.ColonnadeError):
            store.dataset("missing")
    assert re.fullmatch(r"\d+\.\d+\.\d+", colonnade.__version__)
    from importlib.metadata import version

    assert colonnade.__version__ == version("colonnade")


def test_connect_accepts_paths_and_sqlite_uris(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("COLONNADE_STORE", raising=False)
    with colonnade.connect("plain.db") as a:
        a.create_dataset("x", colonnade.DatasetSpec.create("x", _schema()).schema)
    with colonnade.connect("sqlite:///plain.db") as b:
        assert b.datasets() == ["x"]
    with colonnade.connect(f"sqlite:///{tmp_path / 'abs.db'}") as c:
        assert c.datasets() == []
    assert (tmp_path / "abs.db").exists()
    with colonnade.connect() as default:
        assert default.datasets() == []
    assert (tmp_path / "colonnade.db").exists()
    monkeypatch.setenv("COLONNADE_STORE", str(tmp_path / "from-env.db"))
    with colonnade.connect() as env:
        assert env.datasets() == []
    assert (tmp_path / "from-env.db").exists()


def test_bad_store_uris_are_config_errors() -> None:
    from colonnade.errors import ConfigError

    for uri in ("mysql://host/db", "sqlite://", "cassandra:///ks", "cassandra://h/", "cassandra://u:pw@h/ks",
                "cassandra://h/ks?bogus=1"):
        with pytest.raises(ConfigError):
            colonnade.connect(uri)


def _schema():  # type: ignore[no-untyped-def]
    import pyarrow as pa

    return pa.schema([("id", pa.int64())])


@pytest.mark.parametrize(("text", "seconds"), [("90d", 90 * 86_400), ("12h", 43_200), ("30m", 1_800),
                                               ("45s", 45), ("2w", 1_209_600), ("1.5h", 5_400), (" 7D ", 604_800)])
def test_durations_are_read_with_their_unit(text: str, seconds: float) -> None:
    from colonnade.config import parse_duration

    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "7", "d", "7y", "-1d", "seven days", "7 d x"])
def test_a_duration_without_a_known_unit_is_refused_in_one_line(text: str) -> None:
    from colonnade.config import parse_duration
    from colonnade.errors import ConfigError

    with pytest.raises(ConfigError, match="invalid duration"):
        parse_duration(text)
