"""``colonnade bench adimpressions``: the SnappyData/MemSQL/Cassandra streaming study, reproduced.

A Kafka stream of ad impressions (:mod:`colonnade.bench.adimpressions_data`) is ingested by
Colonnade's stream (:mod:`colonnade.stream`) in a process of its own, as ``colonnade stream``
runs (:mod:`colonnade.bench.adimpressions_stream`), while a thread of this process runs the
study's three queries in a loop through Colonnade's SQL, each pinned to the version
visible when it started (its latency is recorded with that version's row count).

1. **main phase**: a producer process sends ``events`` events at full speed into a fresh
   4-partition topic (with ``preload``, it fills the topic before the stream starts: the ingest
   is then measured without a producer competing for the CPU, as the ceiling is). At a third, two thirds and all of them (10M, 20M, 30M by default) the
   report gives the ingest rate over that third, the queries' p50/p95 latencies over the queries
   started in it, freshness and the live segments.
2. **freshness phase**: once the stream has caught up, a producer sends events at ``rate``
   (default: half the sustained ingest rate) for ``freshness_seconds``: freshness at a rate the
   stream keeps up with. Freshness of a commit = the time it became visible (``CommitEvent.at``)
   minus the Kafka timestamp (CreateTime, set by the producer's client when it was produced) of
   the *oldest* event it holds: the longest any event of that commit waited. p50/p95 are over
   commits.
3. **checks**: the table holds every produced event exactly once (count and sum of ids) and
   Q1–Q3 equal DuckDB's answers over the generated events (regenerated from the seed).
4. **references** on the same topic (:mod:`colonnade.bench.adimpressions_refs`): the
   consume+decode ceiling, Cassandra one row per event (a prefix of ``reference_events``), DuckDB
   appended per micro-batch; their answers are checked against the same ground truth.

JSON, Markdown and a PNG go to ``out`` as ``adimpressions-<store kind>.*``; progress goes to
``echo`` (stderr from the command line). A failed check still writes the report, then raises
:class:`BenchError`.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from colonnade.bench import adimpressions_data as data
from colonnade.bench import adimpressions_refs as refs
from colonnade.bench.adimpressions_report import markdown, ratios, summarise, targets, versions
from colonnade.bench.common import cassandra_contact, cassandra_reachable, write_report
from colonnade.errors import ColonnadeError

EVENTS = 30_000_000
REFERENCE_EVENTS = 1_000_000
FRESHNESS_SECONDS = 30.0
#: The sample of ``--sample-on`` (as ``colonnade bench aqp``'s).
SAMPLE_FRACTION = 0.01
SAMPLE_MIN_ROWS = 50
COMMIT_INTERVAL = 1.0
DATASET = "adImpressions"
STALL_SECONDS = 180.0


class BenchError(ColonnadeError):
    """The benchmark could not run, or a check of its results failed."""


@dataclass
class Recorder:
    """What the stream reports, as it reports it (called from the stream's thread)."""

    t0: float = 0.0
    commits: list[dict[str, Any]] = field(default_factory=list)
    rows: int = 0
    lag: int | None = None
    last_commit_at: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def on_commit(self, c: Any) -> None:
        with self.lock:
            self.rows += int(c.rows)
            self.last_commit_at = float(c.at)
            self.commits.append({"version": int(c.version), "rows": int(c.rows), "total": self.rows,
                                 "at": float(c.at) - self.t0,
                                 "oldest_ms": c.oldest_produced_ms, "newest_ms": c.newest_produced_ms,
                                 "freshness_s": None if c.oldest_produced_ms is None
                                 else float(c.at) - c.oldest_produced_ms / 1000.0})

    def on_status(self, s: Any) -> None:
        lag = getattr(s, "lag", None)
        if isinstance(lag, dict):
            self.lag = int(sum(v for v in lag.values() if v is not None))


class _Producer:
    """The producer process; its progress lines are echoed, its JSON result parsed."""

    def __init__(self, bootstrap: str, topic: str, count: int, seed: int, start: int, rate: float | None,
                 echo: Callable[[str], None]) -> None:
        cmd = [sys.executable, "-m", "colonnade.bench.adimpressions_data", "--bootstrap", bootstrap,
               "--topic", topic, "--events", str(count), "--seed", str(seed), "--start", str(start)]
        if rate:
            cmd += ["--rate", str(rate)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.errors: list[str] = []
        self._echo = echo
        self._thread = threading.Thread(target=self._forward, daemon=True)
        self._thread.start()

    def _forward(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            line = line.rstrip()
            if line.startswith("  producer:"):
                self._echo(line)
            elif line and "rdkafka" not in line:
                self.errors.append(line)

    def running(self) -> bool:
        return self.proc.poll() is None

    def result(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        out = self.proc.stdout.read()  # stderr is the forwarding thread's to read
        self.proc.wait()
        self._thread.join()
        if self.proc.returncode != 0:
            raise BenchError(f"producer failed ({self.proc.returncode}): {' | '.join(self.errors[-3:])}")
        return dict(json.loads(out.strip().splitlines()[-1]))

    def kill(self) -> None:
        if self.running():
            self.proc.kill()
            self.proc.wait()


def _wait_for(rec: Recorder, target: int, stream: _StreamProcess, producer: _Producer | None,
              loop: refs._QueryLoop, echo: Callable[[str], None]) -> None:
    """Until the stream made ``target`` events visible; fails on a stream, producer or query
    error, or when nothing was committed for STALL_SECONDS."""
    last_echo = last_rows = 0.0
    last_progress = time.time()
    while rec.rows < target:
        time.sleep(0.25)
        if stream.error is not None:
            raise BenchError(f"stream failed: {stream.error}")
        if loop.error is not None:
            raise BenchError(f"query failed: {loop.error}") from loop.error
        if producer is not None and not producer.running() and producer.proc.returncode:
            producer.result()  # raises with its reason
        if not stream.alive():
            stream.stop()
            raise BenchError(f"the stream stopped at {rec.rows:,} of {target:,} events: {stream.error}")
        now = time.time()
        if rec.rows != last_rows:
            last_rows, last_progress = rec.rows, now
        elif now - last_progress > STALL_SECONDS:
            raise BenchError(f"no commit for {STALL_SECONDS:.0f} s at {rec.rows:,} of {target:,} events")
        if now - last_echo >= 5:
            done = [r for r in loop.runs if r.started > now - rec.t0 - 10]
            lat = ", ".join(f"{q} {statistics.median([r.seconds for r in done if r.query == q]):.2f} s"
                            for q in refs.QUERIES if any(r.query == q for r in done))
            echo(f"  stream: {rec.rows:,} events visible ({rec.rows / max(now - rec.t0, 1e-9):,.0f}/s since "
                 f"start), lag {rec.lag if rec.lag is not None else '?'}, {len(rec.commits)} commits; "
                 f"queries (last 10 s): {lat or '-'}")
            last_echo = now


#: The query loop's decoded-chunk cache: the columns Q1-Q3 read of 30M events (geo, publisher
#: as dictionary indices or strings, bid) fit in it, as a dashboard's would be sized.
QUERY_CACHE_MB = 2048


class _StreamProcess:
    """The stream, in a process of its own (:mod:`colonnade.bench.adimpressions_stream`): its
    commit and status lines go to the recorder as they come."""

    def __init__(self, uri: str, options: dict[str, Any], rec: Recorder) -> None:
        settings = {"uri": uri, "dataset": DATASET, **options}
        self.proc = subprocess.Popen([sys.executable, "-m", "colonnade.bench.adimpressions_stream",
                                      json.dumps(settings)], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.report: Any = None
        self.error: str | None = None
        self.stderr: list[str] = []
        self._rec = rec
        self._threads = [threading.Thread(target=self._read, daemon=True),
                         threading.Thread(target=self._read_stderr, daemon=True)]
        for t in self._threads:
            t.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            msg = json.loads(line)
            if "commit" in msg:
                c = msg["commit"]
                self._rec.on_commit(SimpleNamespace(version=c["version"], rows=c["rows"], at=c["at"],
                                                    oldest_produced_ms=c["oldest_ms"],
                                                    newest_produced_ms=c["newest_ms"]))
            elif "status" in msg:
                self._rec.on_status(SimpleNamespace(lag={int(k): v for k, v in msg["status"]["lag"].items()}))
            elif "report" in msg:
                self.report = SimpleNamespace(**msg["report"])
            elif "error" in msg:
                self.error = msg["error"]

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            if line.strip():
                self.stderr = [*self.stderr[-20:], line.rstrip()]

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout: float = 120.0) -> None:
        """SIGTERM (the stream commits what it holds), then wait; SIGKILL past ``timeout``."""
        if self.alive():
            self.proc.terminate()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for t in self._threads:
            t.join(timeout=10)
        if self.error is None and self.proc.returncode != 0:
            self.error = f"exit status {self.proc.returncode}: {' | '.join(self.stderr[-3:])}"


def _colonnade_queries(uri: str, t0: float) -> tuple[refs._QueryLoop, Any]:
    """The query loop on a store of its own; each query pinned to the latest visible version."""
    import colonnade
    from colonnade.errors import DatasetNotFoundError

    reader = colonnade.connect(uri, cache_mb=QUERY_CACHE_MB)
    holder: dict[str, Any] = {}

    def run_one(name: str) -> tuple[Any, int]:
        ds = holder.get("ds")
        if ds is None:
            try:
                ds = holder["ds"] = reader.dataset(DATASET)
            except DatasetNotFoundError:
                return None, 0
        snap = ds.snapshot()
        if snap.rows == 0:
            return None, 0
        return reader.sql(refs.QUERIES[name], version=snap.version), snap.rows

    return refs._QueryLoop(run_one, t0), reader


def _stream_options(bootstrap: str, topic: str, commit_interval: float) -> dict[str, Any]:
    """What the stream process is given (CSV messages in strict mode, the tuned consumer)."""
    return {"topic": topic, "bootstrap": bootstrap, "commit_interval": commit_interval,
            "consumer": dict(refs.TUNED_CONSUMER)}


def _final_checks(uri: str, total: int, truth: refs.Truth) -> tuple[dict[str, Any], list[str]]:
    import colonnade

    problems: list[str] = []
    with colonnade.connect(uri) as s:
        count, id_sum = s.sql(f"SELECT count(*) AS n, CAST(sum(id) AS BIGINT) AS s FROM {DATASET}").to_pylist()[0].values()
        answers = {q: [tuple(r.values()) for r in s.sql(sql).to_pylist()] for q, sql in refs.QUERIES.items()}
        ds = s.dataset(DATASET)
        latest = ds.snapshot()
        segments = len(latest.segments)
        samples = [(i.name, i.rows, i.base_version) for i in s.samples(DATASET)]
    for name, _, base_version in samples:  # kept current by the stream's commits
        if base_version != latest.version:
            problems.append(f"sample {name} represents version {base_version} of {DATASET}, "
                            f"not its latest, {latest.version}")
    if count != total:
        problems.append(f"colonnade holds {count:,} events, {total:,} were produced")
    if id_sum != truth.id_sum:
        problems.append(f"colonnade's sum(id) is {id_sum}, expected {truth.id_sum}")
    for q, rows in answers.items():
        problems += [f"colonnade {p}" for p in refs.answer_problems(q, rows, truth)]
    return {"count": count, "id_sum": id_sum, "expected_count": total, "expected_id_sum": truth.id_sum,
            "answers": answers, "answers_match": not any(p.startswith("colonnade Q") for p in problems),
            "segments": segments,
            "samples": [{"name": n, "rows": k, "base_version": v} for n, k, v in samples]}, problems


def _check_reference(r: refs.RefResult, truth_table: Any, answers: bool) -> tuple[dict[str, Any], list[str]]:
    import numpy as np

    ids = r.ids if r.ids is not None else np.empty(0, np.int64)
    problems: list[str] = []
    unique = int(np.unique(ids).size)
    if unique != r.events or ids.size != r.events:
        problems.append(f"{r.name}: {ids.size:,} ids of which {unique:,} distinct for {r.events:,} events")
    check: dict[str, Any] = {"events": r.events, "distinct_ids": unique}
    if answers and ids.size:
        truth = refs.truth_of(truth_table.take(ids))
        found = [p for q in refs.QUERIES for p in refs.answer_problems(q, r.answers.get(q, []), truth)]
        problems += [f"{r.name} {p}" for p in found]
        check["answers_match"] = not found
        check["truth"] = truth.answers
    return check, problems


def main(events: int = EVENTS, store: str | None = None, out: str | Path = "bench-results",
         bootstrap: str = "127.0.0.1:9092", reference_events: int = REFERENCE_EVENTS,
         cassandra: str | None = None, rate: float | None = None,
         freshness_seconds: float = FRESHNESS_SECONDS, commit_interval: float = COMMIT_INTERVAL,
         references: tuple[str, ...] = ("ceiling", "cassandra", "duckdb"), seed: int = 42,
         partitions: int = 4, keep_topic: bool = False, preload: bool = False,
         sample_on: tuple[str, ...] = (), echo: Callable[[str], None] = print) -> dict[str, Any]:
    """Run the benchmark; returns the report (also written to ``out``)."""
    import colonnade
    from colonnade.config import parse_store_uri

    out_dir = Path(out)
    work = out_dir / "work"
    work.mkdir(parents=True, exist_ok=True)
    uri = store or f"sqlite:///{work / 'adimpressions.db'}"
    kind = parse_store_uri(uri).scheme if "://" in uri else "sqlite"
    topic = f"adimpressions-{uuid.uuid4().hex[:8]}"
    echo(f"topic {topic} ({partitions} partitions) on {bootstrap}; store {parse_store_uri(uri).display}")
    from confluent_kafka import KafkaException

    try:
        data.create_topic(bootstrap, topic, partitions)
    except KafkaException as exc:
        raise BenchError(f"Kafka at {bootstrap}: {exc.args[0] if exc.args else exc}") from None
    problems: list[str] = []
    report: dict[str, Any] = {"benchmark": "adimpressions", "events": events, "seed": seed, "topic": topic,
                              "partitions": partitions, "store": parse_store_uri(uri).display,
                              "preload": preload,
                              "sample": {"on": list(sample_on), "fraction": SAMPLE_FRACTION,
                                         "min_per_stratum": SAMPLE_MIN_ROWS} if sample_on else None,
                              "store_kind": kind, "commit_interval": commit_interval,
                              "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                              "producer_settings": data.PRODUCER_CONFIG,
                              "stream_consumer_settings": refs.TUNED_CONSUMER, "query_cache_mb": QUERY_CACHE_MB}
    try:
        with colonnade.connect(uri) as st:
            if DATASET in st:
                st.drop_dataset(DATASET)
            if sample_on:  # the stream appends to the dataset and keeps its sample current
                st.create_dataset(DATASET, data.SCHEMA)
                st.create_sample(DATASET, list(sample_on), SAMPLE_FRACTION, min_per_stratum=SAMPLE_MIN_ROWS,
                                 seed=seed)
            producers: list[dict[str, Any]] = []
            if preload:
                echo(f"preloading the topic with {events:,} events (the stream not started yet)")
                first = _Producer(bootstrap, topic, events, seed, 0, None, echo)
                try:
                    producers.append({"phase": "preload", **first.result()})
                finally:
                    first.kill()
            rec = Recorder(t0=time.time())
            stream = _StreamProcess(uri, _stream_options(bootstrap, topic, commit_interval), rec)
            loop, reader = _colonnade_queries(uri, rec.t0)
            cpu0 = time.process_time()
            try:
                with loop:
                    start = time.time() - rec.t0
                    producer = None
                    if preload:
                        echo(f"main phase: the stream ingests the {events:,} preloaded events, queries looping")
                    else:
                        echo(f"main phase: {events:,} events at full speed, queries looping")
                        producer = _Producer(bootstrap, topic, events, seed, 0, None, echo)
                    try:
                        _wait_for(rec, events, stream, producer, loop, echo)
                        if producer is not None:
                            producers.append({"phase": "main", **producer.result()})
                    finally:
                        if producer is not None:
                            producer.kill()
                    main_end = time.time() - rec.t0
                    sustained = events / (main_end - start)
                    extra = 0
                    fresh_rate = rate or max(100.0, round(min(sustained * 0.5, 50_000.0), -2))
                    if freshness_seconds > 0:
                        extra = max(1, int(fresh_rate * freshness_seconds))
                        echo(f"freshness phase: {extra:,} events at {fresh_rate:,.0f}/s")
                        producer = _Producer(bootstrap, topic, extra, seed, events, fresh_rate, echo)
                        try:
                            _wait_for(rec, events + extra, stream, producer, loop, echo)
                            producers.append({"phase": "freshness", **producer.result()})
                        finally:
                            producer.kill()
            finally:
                stream.stop()
                reader.close()
            cpu = time.process_time() - cpu0
            if stream.error is not None:
                raise BenchError(f"stream failed: {stream.error}")
            total = events + extra
            ds = st.dataset(DATASET)
            segments_at = {c["version"]: len(ds.snapshot(c["version"]).segments)
                           for c in _checkpoint_commits(rec.commits, events)}
        echo(f"checks: regenerating {total:,} events for DuckDB's answers")
        truth_table = data.ground_truth(seed, total)
        truth = refs.truth_of(truth_table)
        final, found = _final_checks(uri, total, truth)
        problems += found
        sr = stream.report
        report.update({
            "produced": producers, "total_events": total, "freshness_rate": fresh_rate if extra else None,
            "mean_payload_bytes": sum(p["bytes"] for p in producers) / max(1, sum(p["events"] for p in producers)),
            "stream_report": {k: getattr(sr, k, None) for k in ("events", "rejected", "commits", "seconds")},
            "stream_process_cpu_s": getattr(sr, "cpu_s", None), "bench_process_cpu_s": cpu, "main_phase_s": main_end,
            "colonnade": summarise(rec.commits, loop.runs, events, start, segments_at, commit_interval),
            "commits": rec.commits, "queries": [r.to_dict() for r in loop.runs],
            "final": final, "truth": truth.answers,
        })
        rejected = int(getattr(sr, "rejected", 0) or 0)
        if rejected:
            problems.append(f"the stream rejected {rejected:,} events")
        report["references"], report["reference_checks"] = _run_references(
            references, bootstrap, topic, events, reference_events, cassandra, kind, uri, work,
            truth_table, echo, problems)
    finally:
        if not keep_topic:
            try:
                data.delete_topic(bootstrap, topic)
            except Exception as exc:  # a report is still worth writing
                echo(f"could not delete topic {topic}: {exc}")
    report["machine"] = versions(bootstrap, cassandra_contact(uri, cassandra))
    report["ratios"] = ratios(report)
    report["targets"] = targets(report)
    report["problems"] = problems
    from colonnade.bench.charts import write_adimpressions_chart

    echo(write_report(out_dir / f"adimpressions-{kind}", report, markdown, write_adimpressions_chart))
    if problems:
        raise BenchError("; ".join(problems[:5]))
    return report


def _checkpoint_commits(commits: list[dict[str, Any]], events: int) -> list[dict[str, Any]]:
    """The first commit at or past each third of ``events``."""
    marks = [events // 3, 2 * events // 3, events]
    found = []
    for mark in marks:
        c = next((c for c in commits if c["total"] >= mark), None)
        if c is not None:
            found.append(c)
    return found


def _run_references(wanted: tuple[str, ...], bootstrap: str, topic: str, events: int, reference_events: int,
                    cassandra: str | None, kind: str, uri: str, work: Path, truth_table: Any,
                    echo: Callable[[str], None], problems: list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    results: dict[str, Any] = {}
    checks: dict[str, Any] = {}
    if "ceiling" in wanted:
        echo(f"reference: consume + decode {events:,} events (the ceiling)")
        r = refs.run_ceiling(bootstrap, topic, events, echo)
        results["ceiling"] = r.to_dict()
        checks["ceiling"], found = _check_reference(r, truth_table, answers=False)
        problems += found
    if "cassandra" in wanted:
        contact = cassandra_contact(uri, cassandra)
        if contact and cassandra_reachable(contact):
            n = min(reference_events, events)
            echo(f"reference: cassandra one row per event, {n:,} events, on {contact}")
            keyspace = "colonnade_bench_refs"
            r = refs.run_cassandra(bootstrap, topic, n, contact, keyspace, f"adimpressions_{uuid.uuid4().hex[:8]}",
                                   echo)
            results["cassandra"] = r.to_dict()
            checks["cassandra"], found = _check_reference(r, truth_table, answers=True)
            problems += found
        else:
            reason = f"no Cassandra reachable at {contact}"
            echo(f"reference: cassandra skipped ({reason})")
            results["cassandra"] = {"skipped": reason}
    if "duckdb" in wanted:
        echo(f"reference: duckdb appended per micro-batch, {events:,} events")
        r = refs.run_duckdb(bootstrap, topic, events, work / f"duckdb-{os.getpid()}.db", echo)
        results["duckdb"] = r.to_dict()
        checks["duckdb"], found = _check_reference(r, truth_table, answers=True)
        problems += found
    return results, checks
