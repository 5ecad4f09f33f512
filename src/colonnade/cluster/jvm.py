"""What the local Cassandra and Kafka managers share: finding ``java`` and ``mvn``, fetching a
server's jars from Maven Central into a cached ``dist-<version>/lib`` directory, launching a JVM
detached from the calling process, and recognising the JVM a pid file records (a pid file whose
process has exited, or whose pid now belongs to another program, is stale and ignored).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from colonnade.errors import ClusterError

MARKER = ".complete"
_DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies"


def find_tool(name: str, package: str) -> str:
    """The path of ``java`` ($JAVA_HOME first) or ``mvn``; a one-line error naming the package."""
    if name == "java" and os.environ.get("JAVA_HOME"):
        candidate = Path(os.environ["JAVA_HOME"]) / "bin" / "java"
        if candidate.is_file():
            return str(candidate)
    found = shutil.which(name)
    if found is None:
        what = "a Java 17 JDK" if name == "java" else "Maven"
        raise ClusterError(f"{name} not found: install {what} (e.g. apt-get install {package})")
    return found


def java() -> str:
    return find_tool("java", "openjdk-17-jdk-headless")


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version))


def tail(path: Path, lines: int) -> list[str]:
    try:
        return path.read_text(errors="replace").splitlines()[-lines:]
    except FileNotFoundError:
        return []


def cached_version(cache_dir: Path, prefix: str) -> str | None:
    """The newest complete ``dist-<prefix>*`` directory's version, or None."""
    found = [p.name[5:] for p in cache_dir.glob(f"dist-{prefix}*") if (p / MARKER).exists()]
    return max(found, key=version_key) if found else None


def fetch_distribution(
    cache_dir: Path, version: str, pom: Callable[[str], str], main_jar: str
) -> tuple[str, Path]:
    """Copy the runtime dependencies of ``pom(version)`` (a version or a Maven range) into
    ``cache_dir/dist-<resolved>/lib`` unless present; return (resolved version, lib directory).

    ``main_jar`` is the artifact whose jar names the resolved version (``cassandra-all``). The
    copy is made in a staging directory and renamed into place, so a killed download never
    leaves a directory that looks complete.
    """
    dist = cache_dir / f"dist-{version}"
    if (dist / MARKER).exists():
        return version, dist / "lib"
    mvn = find_tool("mvn", "maven")
    staging = cache_dir / f"staging-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    (staging / "lib").mkdir(parents=True)
    (staging / "pom.xml").write_text(pom(version))
    cmd = [
        mvn,
        "-q",
        "-B",
        "-U",  # otherwise a failed lookup stays cached in ~/.m2 and is never retried
        "-Dstyle.color=never",
        _DEPENDENCY_PLUGIN,
        "-DoutputDirectory=lib",
        "-DincludeScope=runtime",
    ]
    proc = subprocess.run(cmd, cwd=staging, capture_output=True, text=True)
    jars = list((staging / "lib").glob(f"{main_jar}-*.jar"))
    if proc.returncode != 0 or not jars:
        shutil.rmtree(staging, ignore_errors=True)
        lines = re.sub(r"\x1b\[[0-9;]*m", "", proc.stdout + proc.stderr).splitlines()
        errors = [line for line in lines if line.startswith("[ERROR]") and line[7:].strip()]
        detail = (errors or lines or ["no output"])[0][:400]
        raise ClusterError(f"mvn could not fetch {main_jar} {version}: {detail}")
    resolved = jars[0].name[len(main_jar) + 1 : -len(".jar")]
    count = len(list((staging / "lib").glob("*.jar")))
    (staging / MARKER).write_text(f"{resolved} {count} jars\n")
    dist = cache_dir / f"dist-{resolved}"
    if (dist / MARKER).exists():  # another process finished first
        shutil.rmtree(staging, ignore_errors=True)
    else:
        shutil.rmtree(dist, ignore_errors=True)  # a half-written copy from a killed run
        staging.rename(dist)
    return resolved, dist / "lib"


def launch_detached(cmd: list[str], cwd: Path, stdout: Path, timer_slack_ns: int | None = None) -> int:
    """Start ``cmd`` in its own session with stdout and stderr appended to ``stdout``; its pid.

    It forks through sh so the JVM is re-parented away from us: it outlives this process, and no
    Popen object lingers to warn about a still-running child. ``timer_slack_ns``: the timer
    slack of the process (``prctl(PR_SET_TIMERSLACK)``, kept across fork and exec and by the
    threads it starts; Linux only, ignored elsewhere), how late the kernel may end its timed
    sleeps so as to wake it fewer times.
    """
    launcher = 'exec "$@" >>"$COLONNADE_STDOUT" 2>&1 </dev/null &\necho $!'
    env = {**os.environ, "COLONNADE_STDOUT": str(stdout)}
    out = subprocess.run(
        ["/bin/sh", "-c", launcher, "sh", *cmd],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        start_new_session=True,
        check=True,
        preexec_fn=_slack_setter(timer_slack_ns) if timer_slack_ns else None,
    )
    return int(out.stdout.strip())


PR_SET_TIMERSLACK = 29


def _slack_setter(ns: int) -> Callable[[], None] | None:
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up before the fork, not in the child

    def set_slack() -> None:
        prctl(PR_SET_TIMERSLACK, ctypes.c_ulong(ns), 0, 0, 0)

    return set_slack


def still_gone(pid: Callable[[], int | None], recheck: float = 1.0) -> bool:
    """For a starting server whose ``pid()`` has just found no process: True if it still finds
    none ``recheck`` seconds later. One look may fall between the launcher's exit and the server's
    start (an exec, during which the pid's command line may be empty)."""
    time.sleep(recheck)
    return pid() is None


def recorded_pid(pid_file: Path, *markers: str) -> int | None:
    """The pid in ``pid_file`` if that process is alive and its command line holds every marker
    (guards against a stale file whose pid was reused by another program)."""
    try:
        pid = int(pid_file.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None
    proc = Path(f"/proc/{pid}")
    if proc.exists():
        try:
            # A zombie leader with other threads left is a JVM still exiting (and still
            # holding its ports); a lone zombie has exited and awaits a reaper.
            zombie = proc.joinpath("stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
            if zombie and len(os.listdir(proc / "task")) <= 1:
                return None
            cmdline = proc.joinpath("cmdline").read_bytes().decode(errors="replace")
        except (OSError, IndexError):
            return None
        return pid if all(m in cmdline for m in markers) else None
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return None
    return pid
