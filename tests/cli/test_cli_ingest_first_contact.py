"""A first ``colonnade ingest`` of an unknown file, through the real console script (on both
stores where it is about what gets stored): unterminated quotes, the schema a new dataset gets
and the warnings about it, Ctrl-C at every step of a commit, the progress bar on a terminal, and
standard input and quoted patterns as inputs."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from dataclasses import dataclass
from pathlib import Path

from colonnade.store import Store

COLONNADE = str(Path(sys.executable).with_name("colonnade"))
UNTERMINATED = 'id,name,v\n1,a,1.5\n2,b,"unterminated\n3,c,2.5\n'


@dataclass
class Ran:
    status: int
    stdout: str
    stderr: str


def child_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COLONNADE_")}
    return {**env, **extra}


def colonnade(store: Store | str, *args: str, input: bytes | None = None,
              cwd: Path | None = None) -> Ran:
    uri = store if isinstance(store, str) else store.uri
    proc = subprocess.run([COLONNADE, "--store", uri, *args], input=input, capture_output=True,
                          env=child_env(), cwd=cwd, timeout=300)
    return Ran(proc.returncode, proc.stdout.decode(), proc.stderr.decode())


def ids(store: Store, name: str) -> list[int]:
    return store.sql(f"SELECT id FROM {name} ORDER BY id").column("id").to_pylist()


def rows_of(store: Store, name: str) -> int:
    return store.dataset(name).snapshot().rows if name in store else 0


def events_csv(path: Path, rows: int, first: int = 0, odd: dict[int, str] | None = None) -> Path:
    lines = ["id,Actor1Name,NumArticles,SQLDATE"]
    for i in range(first, first + rows):
        articles = (odd or {}).get(i, str(i % 50 + 1))
        lines.append(f"{i},actor{i},{articles},2024-01-{i % 28 + 1:02d}")
    path.write_text("\n".join(lines) + "\n")
    return path


# -- 1. an unterminated quote ---------------------------------------------------------------------
def test_an_unterminated_quote_is_one_bad_row_in_both_modes(store: Store, tmp_path: Path) -> None:
    path = tmp_path / "u.csv"
    path.write_text(UNTERMINATED)
    strict = colonnade(store, "ingest", "t", str(path))
    assert strict.status == 1
    assert strict.stderr == (f"error: {path}:3: unterminated quoted field (no closing quote "
                             "before the end of the file)\n")
    assert rows_of(store, "t") == 0
    rejects = tmp_path / "r.jsonl"
    quarantine = colonnade(store, "ingest", "t", str(path), "--on-error", "quarantine",
                           "--rejects", str(rejects))
    assert quarantine.status == 0, quarantine
    assert quarantine.stdout.startswith("ingested 2 rows from 1 file into t (v1)")
    assert quarantine.stdout.endswith(f", 1 rejected (see {rejects})\n")
    assert ids(store, "t") == [1, 3]
    assert '"line": 3' in rejects.read_text() and '"raw": "2,b,\\"unterminated"' in rejects.read_text()


# -- 2. the schema of a new dataset -----------------------------------------------------------------
def test_a_new_dataset_shows_its_types_and_warns_of_a_column_made_text(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 's.db'}"
    path = events_csv(tmp_path / "events.csv", 1500, odd={1400: "many"})
    first = colonnade(store, "ingest", "ev", str(path))
    assert first.status == 0, first
    assert first.stdout.startswith("ingested 1,500 rows from 1 file into ev (v1)")
    assert first.stderr.splitlines() == [
        f"created dataset ev; column types inferred from the first 1,500 rows of {path}:",
        "  id: int64, Actor1Name: string, NumArticles: string, SQLDATE: date32",
        "warning: column NumArticles is string, though 1,499 of its 1,500 values in those 1,500 "
        f"rows (99.9%) are int64; the first that is not: {path}:1402: 'many'",
        "  to store it as int64: drop dataset ev, then ingest again with --schema FILE, FILE "
        "holding the line 'NumArticles: int64' (the other columns are still inferred), and "
        "--on-error quarantine to set aside the rows whose NumArticles is not int64",
    ]
    # into the dataset it now exists: nothing more to say
    more = colonnade(store, "ingest", "ev", str(events_csv(tmp_path / "more.csv", 10, 5000)))
    assert more.status == 0 and more.stderr == ""
    # the fix, as the warning gives it
    schema = tmp_path / "fix.schema"
    schema.write_text("NumArticles: int64\n")
    assert colonnade(store, "drop", "-y", "ev").status == 0
    fixed = colonnade(store, "ingest", "ev", str(path), "--schema", str(schema),
                      "--on-error", "quarantine", "--rejects", str(tmp_path / "r.jsonl"))
    assert fixed.status == 0 and ", 1 rejected" in fixed.stdout
    assert fixed.stderr.splitlines() == [
        f"created dataset ev; column types inferred from the first 1,500 rows of {path}, where "
        "--schema does not give them:",
        "  id: int64, Actor1Name: string, NumArticles: int64, SQLDATE: date32"]


# -- 3. Ctrl-C ----------------------------------------------------------------------------------------
def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return "gone"


def interrupted_at(store: Store, fault: str, *args: str) -> Ran:
    """Run ``colonnade ingest ARGS``, frozen at the fault point, then Ctrl-C it (a SIGINT, as the
    terminal sends) and let it go on."""
    proc = subprocess.Popen([COLONNADE, "--store", store.uri, "ingest", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=child_env(COLONNADE_FAULTS=f"{fault}:stop"))
    deadline = time.monotonic() + 120
    while _state(proc.pid) != "T":
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"never reached {fault}"
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    proc.send_signal(signal.SIGCONT)
    out, err = proc.communicate(timeout=120)
    return Ran(proc.returncode, out.decode(), err.decode())


def test_ctrl_c_says_exactly_what_was_committed(store: Store, tmp_path: Path) -> None:
    a = events_csv(tmp_path / "a.csv", 1000)
    b = events_csv(tmp_path / "b.csv", 1000, 1000)
    c = events_csv(tmp_path / "c.csv", 1000, 2000)
    cases = [  # fault point, what is said, rows stored
        ("after_chunks:1", "interrupted: nothing committed to {t}", 0),  # writing the first file
        ("before_commit:1", "interrupted: nothing committed to {t}", 0),
        ("after_commit:1", "interrupted after committing {t} v1 (1,000 rows); the rest was not "
                           f"ingested ({b} and 1 more file)", 1000),
        ("before_commit:2", "interrupted after committing {t} v1 (1,000 rows); the rest was not "
                            f"ingested ({b} and 1 more file)", 1000),
        ("after_commit:3", "interrupted after committing {t} v1-v3 (3,000 rows from 3 files); "
                           "that was all of the input", 3000),
    ]
    for i, (fault, said, rows) in enumerate(cases):
        name = f"t{i}"
        run = interrupted_at(store, fault, name, str(a), str(b), str(c))
        assert run.status == 130, (fault, run)
        assert run.stderr == said.format(t=name) + "\n", fault
        assert run.stdout == "" and "Traceback" not in run.stderr
        assert rows_of(store, name) == rows, fault
        if rows or fault == "before_commit:1":
            # a new dataset is recorded just before its first commit record: stopped between
            # the two, it is left empty (see "Not promised" in the README)
            assert store.dataset(name).version == rows // 1000
        else:
            assert name not in store, fault  # a dataset is created by its first commit
    # as JSON: the result so far, and what was not ingested
    run = interrupted_at(store, "after_commit:1", "tj", str(a), str(b), "--json")
    assert run.status == 130
    report = json.loads(run.stdout)
    assert (report["interrupted"], report["version"], report["rows"]) == (True, 1, 1000)
    assert report["pending"] == [str(b)]
    # what was not committed can be ingested again: exactly the rest is added
    again = colonnade(store, "ingest", "t3", str(a), str(b), str(c))
    assert again.status == 0 and "2,000 rows from 2 files" in again.stdout
    assert ids(store, "t3") == list(range(3000))


# -- 4. the progress bar -------------------------------------------------------------------------
def wide_csv(path: Path, rows: int) -> Path:
    """A CSV file of ``rows`` rows with text of many distinct values (written by pyarrow: fast)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pacsv

    n = np.arange(rows)

    def text(prefix: str, values: np.ndarray) -> pa.Array:
        return pc.binary_join_element_wise(prefix, pc.cast(pa.array(values), pa.string()), "")

    pacsv.write_csv(pa.table({
        "id": n, "name": text("name", n), "city": text("city", n % 5003), "v": n * 0.25,
        "day": pc.cast(pa.array((n % 28 + 19_800).astype("int32")), pa.date32()),
        "note": text("n", n * 7 % 1_000_003)}), path)
    return path


def test_the_bar_shows_progress_and_an_eta_on_a_terminal(tmp_path: Path) -> None:
    path = wide_csv(tmp_path / "big.csv", 2_500_000)  # about 150 MB
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
    proc = subprocess.Popen([COLONNADE, "--store", str(tmp_path / "s.db"), "ingest", "t",
                             str(path)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=slave, env=child_env(TERM="xterm-256color"))
    os.close(slave)
    frames: list[tuple[float, str]] = []  # what the terminal was sent, when
    while True:
        ready, _, _ = select.select([master], [], [], 0.1)
        if ready:
            try:
                data = os.read(master, 1 << 16)
            except OSError:
                break
            if not data:
                break
            now = time.monotonic()
            frames.extend((now, frame) for frame in data.decode(errors="replace").split("\r")
                          if frame.strip())
        elif proc.poll() is not None:
            break
    os.close(master)
    stdout = proc.stdout.read().decode() if proc.stdout else ""
    assert proc.wait() == 0
    assert stdout.startswith("ingested 2,500,000 rows from 1 file into t (v1)")
    bar = re.compile(r"(\d+)% +([\d.,]+)/([\d.,]+) MB +([\d,]+) rows +([\d,]+) rows/s +"
                     r"ETA (\d+:\d\d:\d\d|-:--:--)")
    digest = re.compile(r"digest of .*?(\d+)% +[\d.,]+/[\d.,]+ MB read +ETA (\d+:\d\d:\d\d)")
    drawn = [(t, m) for t, frame in frames if (m := bar.search(frame)) is not None]
    assert drawn, frames[:5]
    up, down = drawn[0][0], drawn[-1][0]
    # a real ETA within the first second the bar is up, before the end: while the file is read
    # for its digest, that read's; then the ingest's
    etas = [t for t, frame in frames if (m := digest.search(frame)) and int(m.group(1)) < 100]
    etas += [t for t, m in drawn if m.group(6) != "-:--:--" and int(m.group(1)) < 100]
    assert etas and min(etas) - up < 1.0, frames[:10]
    assert any(m.group(6) != "-:--:--" for _, m in drawn if int(m.group(1)) < 100)
    percents = [int(m.group(1)) for _, m in drawn]
    assert percents == sorted(percents) and percents[-1] == 100
    # it moved, it did not jump from 0 to 100 (how many steps a 10/s refresh catches depends on
    # the machine's load: two between the ends show movement)
    assert len({p for p in percents if 0 < p < 100}) >= 2
    # redrawn at least twice a second while it was up
    assert len(drawn) >= 2 * (down - up)


# -- 5. standard input and patterns ----------------------------------------------------------------
def test_standard_input_is_an_input_and_the_same_data_again_adds_nothing(
        store: Store, tmp_path: Path) -> None:
    data = events_csv(tmp_path / "e.csv", 100).read_bytes()
    first = colonnade(store, "ingest", "t", "-", input=data)
    assert first.status == 0, first
    assert first.stdout.startswith("ingested 100 rows from 1 file into t (v1)")
    again = colonnade(store, "ingest", "t", "-", input=data)
    assert again.status == 0
    assert again.stdout == "<stdin>: already ingested, 0 rows added; use --force to append again\n"
    assert rows_of(store, "t") == 100
    tsv = data.replace(b",", b"\t")
    other = colonnade(store, "ingest", "t", "-", "--format", "tsv", input=tsv)
    assert other.status == 0 and other.stdout.startswith("ingested 100 rows")  # other bytes
    assert rows_of(store, "t") == 200


def test_standard_input_names_itself_in_errors_and_rejects(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 's.db'}"
    strict = colonnade(store, "ingest", "t", "-", input=UNTERMINATED.encode())
    assert strict.status == 1 and strict.stderr.startswith("error: <stdin>:3: unterminated quoted")
    quarantine = colonnade(store, "ingest", "u", "-", "--on-error", "quarantine",
                           input=UNTERMINATED.encode(), cwd=tmp_path)
    assert quarantine.status == 0
    assert quarantine.stdout.endswith(", 1 rejected (see stdin.rejects.jsonl)\n")
    assert '"file": "<stdin>", "line": 3' in (tmp_path / "stdin.rejects.jsonl").read_text()
    empty = colonnade(store, "ingest", "v", "-", input=b"")
    assert empty.stdout == "<stdin>: empty file, 0 rows added; the dataset was not created\n"


def test_the_help_says_how_standard_input_is_identified() -> None:
    text = " ".join(subprocess.run([COLONNADE, "ingest", "--help"], capture_output=True,
                                   text=True, env=child_env()).stdout.split())
    assert "'-' for standard input" in text
    assert "identified by the digest of its content: piping the same data again adds nothing" in text


def test_quoted_patterns_are_expanded_in_sorted_order(store: Store, tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    for i, name in enumerate(["b.csv", "a.csv", "c.csv"]):
        events_csv(data / name, 10, i * 10)
    (data / "skip.txt").write_text("not a csv\n")
    run = colonnade(store, "ingest", "t", str(data / "*.csv"), "--json", cwd=tmp_path)
    assert run.status == 0, run
    assert [f'"path": "{data / n}"' in run.stdout for n in ("a.csv", "b.csv", "c.csv")] == [True] * 3
    assert run.stdout.index("a.csv") < run.stdout.index("b.csv") < run.stdout.index("c.csv")
    history = store.dataset("t").history()
    assert [c.info["input"] for c in history] == [str(data / n) for n in ("a.csv", "b.csv", "c.csv")]
    none = colonnade(store, "ingest", "t", str(data / "*.tsv"))
    assert none.status == 1 and none.stderr == f"error: no file matches '{data / '*.tsv'}'\n"
    # a path that exists is taken as it is, even with pattern characters in its name
    literal = events_csv(data / "[x].csv", 5, 100)
    named = colonnade(store, "ingest", "t", str(literal))
    assert named.status == 0 and named.stdout.startswith("ingested 5 rows")
    assert rows_of(store, "t") == 35
