"""The README's CLI quick start, run as written in a fresh directory."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def _block(heading: str, language: str) -> str:
    text = README.read_text()
    start = text.index(heading)
    match = re.search(rf"```{language}\n(.*?)```", text[start:], re.S)
    assert match, f"no {language} block under {heading!r}"
    return match.group(1)


def _run_block(heading: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The bash block under ``heading``, run as written in ``cwd`` with this build's commands."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.pop("COLONNADE_STORE", None)
    result = subprocess.run(["bash", "-euo", "pipefail", "-c", _block(heading, "bash")], cwd=cwd,
                            env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return result


@pytest.mark.unit
def test_cli_quick_start_runs_as_written(tmp_path: Path) -> None:
    result = _run_block("## CLI quick start", tmp_path)
    out = result.stdout
    # the sql answer, the explain numbers, the second ingest adding nothing, verify passing
    assert re.search(r"Lyon\s+20\.5", out), out
    assert re.search(r"Nantes\s+23\.25", out), out
    explain, _ = json.JSONDecoder().raw_decode(out[out.index("{"):])
    assert explain["segments_scanned"] == 1 and explain["segments_total"] == 3
    assert "already ingested" in result.stderr + out
    assert (tmp_path / "quickstart.db").exists()


@pytest.mark.kafka
def test_streaming_quick_start_runs_as_written(tmp_path: Path, kafka_bootstrap: str) -> None:
    """The broker is the suite's (the block's `colonnade kafka start` line is left out); the
    topic is this test's own."""
    script = _block("## Streaming from Kafka", "bash")
    lines = [line for line in script.splitlines() if not line.startswith("colonnade kafka start")]
    topic = f"clicks-{os.getpid()}-{tmp_path.name}"
    script = "\n".join(lines).replace("produce clicks", f"produce {topic}").replace("--topic clicks", f"--topic {topic}")
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["COLONNADE_KAFKA"] = kafka_bootstrap
    env.pop("COLONNADE_STORE", None)
    result = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "produced 4 messages" in out
    assert re.search(r"streamed 4 events from \S+ into clicks in \d+ commits?", out), out
    assert re.search(r"CA\s+1\.25", out) and re.search(r"NY\s+2\.5", out), out
    reject = json.loads(out.splitlines()[-1])
    assert reject["raw"] == "oops" and reject["reason"].startswith("not valid JSON")


@pytest.mark.unit
def test_approximate_answers_block_runs_as_written(tmp_path: Path) -> None:
    """The WITH ERROR block, on 200,000 generated impressions (skewed geos and publishers)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.csv as pacsv

    rng = np.random.default_rng(5)
    n = 200_000
    pacsv.write_csv(pa.table({
        "geo": pa.array([f"G{g:02d}" for g in rng.zipf(1.5, n) % 40]),
        "publisher": pa.array([f"pub{p}" for p in rng.zipf(1.3, n) % 30]),
        "bid": pa.array(np.round(rng.random(n), 2)),
    }), tmp_path / "impressions.csv")
    out = _run_block("## Approximate answers with error bounds", tmp_path).stdout
    assert "created sample imps_by_geo_publisher" in out
    assert re.search(r"geo\s+total\s+err\s+low\s+high", out), out
    assert "answered from sample imps_by_geo_publisher of imps (fraction 0.02" in out
    assert re.search(r"imps_by_geo_publisher\s+imps\s+geo, publisher\s+0\.02", out), out
