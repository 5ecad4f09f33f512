"""The JVM half of the Spark reader: ``colonnade.DefaultSource`` and its scan (Java sources in
``java/``), compiled once per PySpark version against PySpark's own jars, into
``~/.cache/colonnade/spark/`` (``$COLONNADE_CACHE_DIR/spark``). Needs a JDK's ``javac``."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

from colonnade.errors import ColonnadeError

SOURCES = Path(__file__).parent / "java"
CLASS = "colonnade.DefaultSource"


def _cache_dir() -> Path:
    base = os.environ.get("COLONNADE_CACHE_DIR")
    return (Path(base) if base else Path.home() / ".cache" / "colonnade") / "spark"


def _javac() -> str:
    home = os.environ.get("JAVA_HOME")
    candidates = [str(Path(home) / "bin" / "javac")] if home else []
    found = shutil.which("javac")
    if found:
        candidates.append(found)
    for c in candidates:
        if os.access(c, os.X_OK):
            return c
    raise ColonnadeError("the Spark reader's JVM classes need a JDK to compile (javac not found: set "
                         "JAVA_HOME), or read through the Python data source: register(spark, jvm=False)")


def jar() -> Path:
    """The jar of the JVM reader for the installed PySpark, compiled if not yet."""
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    sources = sorted(SOURCES.rglob("*.java"))
    digest = hashlib.sha256(pyspark.__version__.encode())
    for s in sources:
        digest.update(s.name.encode() + s.read_bytes())
    out = _cache_dir() / f"colonnade-spark-{pyspark.__version__}-{digest.hexdigest()[:16]}.jar"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="colonnade-javac-") as tmp:
        classes = Path(tmp) / "classes"
        done = subprocess.run([_javac(), "--release", "17", "-Xlint:-options", "-nowarn", "-cp",
                               str(jars / "*"), "-d", str(classes), *map(str, sources)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise ColonnadeError("compiling the Spark reader's JVM classes failed: "
                                 + (done.stderr.strip().splitlines() or ["(no output)"])[0])
        staged = Path(tmp) / out.name
        with zipfile.ZipFile(staged, "w", zipfile.ZIP_DEFLATED) as z:
            for f in sorted(classes.rglob("*.class")):
                z.write(f, f.relative_to(classes).as_posix())
        os.replace(staged, out)  # atomic: a concurrent compile writes the same bytes
    return out
