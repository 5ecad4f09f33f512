"""Local Apache Kafka 4 broker for development and tests: one KRaft node that is broker and
controller at once. It fetches ``org.apache.kafka:kafka_2.13`` and its runtime dependencies (plus
the log4j binding the server logs through) from Maven Central with ``mvn`` into a cached
``dist-<version>/lib`` directory, formats the log directory once as a standalone KRaft quorum
(``kafka.tools.StorageTool format --standalone``), runs ``kafka.Kafka`` as a detached JVM with a
small heap, waits until it answers a Kafka Metadata request listing itself, and stops only the
process it recorded. The log directory persists across restarts, so topics and their messages
do too; the only prerequisites are a Java 17 JDK and Maven.

Layout of a broker directory: ``conf/`` (server.properties, log4j2.xml, written at every start),
``data/`` (the formatted log directory), ``logs/`` (server.log, stdout.log) and ``pid``.
"""

from __future__ import annotations

import base64
import contextlib
import os
import signal
import socket
import struct
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from colonnade.cluster.jvm import (
    cached_version,
    fetch_distribution,
    java,
    launch_detached,
    recorded_pid,
    still_gone,
    tail,
)
from colonnade.errors import ClusterError

KAFKA_PORT = 9092
HOST = "127.0.0.1"
NODE_ID = 1
DEFAULT_START_TIMEOUT = 120.0
STOP_TIMEOUT = 30.0
# Maven picks the newest release in this range, so "4.x latest" needs no hard-coded list.
VERSION_RANGE = "[4.0.0,4.9999]"
# kafka_2.13 brings log4j-core but no SLF4J binding (the binary distribution adds one): without
# it the server logs nothing. The binding is declared first so that its log4j-api, log4j-core
# and slf4j-api are the versions Maven picks.
LOG4J_VERSION = "2.25.5"
_MAIN_CLASS = "kafka.Kafka"

# From kafka-server-start.sh and kafka-run-class.sh (G1, short pauses), with a heap far below
# its 1 GiB default: a development broker shares a small machine with Cassandra and the tests.
# C1 only: on two busy cores the C2 compiler threads doubled the start-up time (5-6 s against
# 9-13 s to answering), and a broker's work is mostly I/O and copying.
SERVER_FLAGS = (
    "-XX:TieredStopAtLevel=1 -XX:+UseG1GC -XX:MaxGCPauseMillis=20 "
    "-XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent "
    "-XX:+ExitOnOutOfMemoryError -XX:+PerfDisableSharedMem "
    "-Djava.awt.headless=true -Djava.net.preferIPv4Stack=true"
).split()
# The storage tool runs for a second: the cheapest collector and JIT start it fastest.
TOOL_FLAGS = "-Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1".split()

_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.colonnade</groupId>
  <artifactId>kafka-dist</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-slf4j-impl</artifactId>
      <version>{log4j}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_2.13</artifactId>
      <version>{version}</version>
    </dependency>
  </dependencies>
</project>
"""

_LOG4J2 = """<Configuration status="WARN" shutdownHook="disable">
  <Appenders>
    <File name="FILE" fileName="{file}">
      <PatternLayout pattern="[%d] %p %m (%c)%n"/>
    </File>
  </Appenders>
  <Loggers>
    <Logger name="kafka" level="INFO"/>
    <Logger name="org.apache.kafka" level="INFO"/>
    <!-- every client and server dumps its whole configuration at INFO -->
    <Logger name="org.apache.kafka.common.config.AbstractConfig" level="WARN"/>
    <Root level="WARN"><AppenderRef ref="FILE"/></Root>
  </Loggers>
</Configuration>
"""

_TOOLS_LOG4J2 = """<Configuration status="WARN" shutdownHook="disable">
  <Appenders><Console name="STDERR" target="SYSTEM_ERR">
    <PatternLayout pattern="%p %m%n"/></Console></Appenders>
  <Loggers><Root level="WARN"><AppenderRef ref="STDERR"/></Root></Loggers>
</Configuration>
"""


def _pom(version: str) -> str:
    return _POM.format(version=version, log4j=LOG4J_VERSION)


@dataclass(frozen=True)
class BrokerStatus:
    address: str  # host:port of the client listener
    pid: int | None
    state: str  # 'up' (answers Metadata), 'starting' (JVM alive, not answering yet) or 'down'


def default_directory() -> Path:
    env = os.environ.get("COLONNADE_KAFKA_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "colonnade" / "kafka"


def _read_exact(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed")
        buf += chunk
    return buf


def metadata_brokers(host: str, port: int, timeout: float = 3.0) -> list[tuple[int, str, int]]:
    """(node id, host, port) of every broker a Kafka Metadata v4 request lists, or [] when
    nothing at host:port answers one (not listening, not Kafka, or still starting).

    Version 4 is the oldest Kafka 4 accepts (KIP-896) and the last before flexible encodings:
    request header v1 (api key 3, version, correlation id, client id), then topics = null (all)
    and allow_auto_topic_creation = false; the response opens with the correlation id, the
    throttle time and the broker array.
    """
    client = b"colonnade"
    body = struct.pack(">hhih", 3, 4, 1, len(client)) + client + struct.pack(">ib", -1, 0)
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            sock.sendall(struct.pack(">i", len(body)) + body)
            (size,) = struct.unpack(">i", _read_exact(sock, 4))
            if not 12 <= size <= 1 << 24:
                return []
            data = _read_exact(sock, size)
            correlation, _, count = struct.unpack_from(">iii", data)
            if correlation != 1:
                return []
            brokers, pos = [], 12
            for _ in range(count):
                node, length = struct.unpack_from(">ih", data, pos)
                name = data[pos + 6 : pos + 6 + length].decode()
                pos += 6 + length
                (broker_port, rack) = struct.unpack_from(">ih", data, pos)
                pos += 6 + max(rack, 0)
                brokers.append((node, name, broker_port))
            return brokers
    except (OSError, struct.error, UnicodeDecodeError):
        return []


def _port_open(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(1.0)
        return probe.connect_ex((HOST, port)) == 0


def free_port_pair() -> int:
    """A port N such that N and N + 1 (a broker's client and controller ports) are both free on
    127.0.0.1 right now, for throwaway brokers in tests."""
    for _ in range(100):
        with socket.socket() as first:
            first.bind((HOST, 0))
            port = first.getsockname()[1]
            if port >= 65535:
                continue
            with socket.socket() as second:
                try:
                    second.bind((HOST, port + 1))
                except OSError:
                    continue
        return int(port)
    raise ClusterError("found no two adjacent free ports on 127.0.0.1")


def new_cluster_id() -> str:
    """A random Kafka cluster id, as ``kafka-storage random-uuid`` makes one (URL-safe base64 of
    16 bytes, never starting with '-', which a command line would take for an option)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


class LocalKafka:
    """A one-node Kafka broker (KRaft, broker and controller in one JVM) living under one directory.

    Clients connect to ``127.0.0.1:port``; the controller listens on ``controller_port``
    (default ``port + 1``). ``port=None`` means the port this directory's broker last ran on,
    else 9092.
    """

    def __init__(
        self,
        directory: Path | None = None,
        port: int | None = None,
        heap: str = "512m",
        version: str | None = None,
        *,
        controller_port: int | None = None,
        cache_dir: Path | None = None,
        start_timeout: float = DEFAULT_START_TIMEOUT,
    ) -> None:
        self.directory = Path(directory) if directory is not None else default_directory()
        # The jar download is shared: a throwaway broker directory still reuses the cache.
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_directory()
        recorded = self._recorded_ports()
        if port is None:
            port, controller_port = recorded or (KAFKA_PORT, controller_port)
        self.port = port
        self.controller_port = controller_port if controller_port is not None else port + 1
        for p in (self.port, self.controller_port):
            if not 1 <= p <= 65535:
                raise ClusterError(f"port {p} is out of range 1..65535")
        if self.port == self.controller_port:
            raise ClusterError("the client and controller ports must differ")
        self.heap = heap
        self.version = version  # None until resolved: newest cached or newest on Maven Central
        self.start_timeout = start_timeout

    # -- layout ---------------------------------------------------------------------------
    @property
    def bootstrap_servers(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def conf_dir(self) -> Path:
        return self.directory / "conf"

    @property
    def data_dir(self) -> Path:
        return self.directory / "data"

    @property
    def log_dir(self) -> Path:
        return self.directory / "logs"

    @property
    def pid_file(self) -> Path:
        return self.directory / "pid"

    def _recorded_ports(self) -> tuple[int, int] | None:
        """(client port, controller port) of the last configuration written here, if any."""
        try:
            text = (self.directory / "conf" / "server.properties").read_text()
        except FileNotFoundError:
            return None
        props = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
        try:
            listeners = dict(
                item.split("://", 1) for item in props.get("listeners", "").split(",") if item
            )
            return (
                int(listeners["PLAINTEXT"].rsplit(":", 1)[1]),
                int(listeners["CONTROLLER"].rsplit(":", 1)[1]),
            )
        except (KeyError, ValueError, IndexError):
            return None

    # -- distribution ---------------------------------------------------------------------
    def ensure_distribution(self) -> Path:
        """Return the lib/ directory holding kafka_2.13 and its runtime jars, fetching if needed."""
        if self.version is None:
            self.version = cached_version(self.cache_dir, "4.")
        self.version, lib = fetch_distribution(
            self.cache_dir, self.version or VERSION_RANGE, _pom, "kafka_2.13"
        )
        return lib

    # -- configuration --------------------------------------------------------------------
    def _write_config(self) -> Path:
        conf = self.conf_dir
        conf.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(exist_ok=True)
        self.data_dir.mkdir(exist_ok=True)
        controller = f"{HOST}:{self.controller_port}"
        (conf / "server.properties").write_text(f"""\
process.roles=broker,controller
node.id={NODE_ID}
controller.quorum.bootstrap.servers={controller}
listeners=PLAINTEXT://{HOST}:{self.port},CONTROLLER://{controller}
advertised.listeners=PLAINTEXT://{HOST}:{self.port}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs={self.data_dir}
num.partitions=1
auto.create.topics.enable=true
# One node: every internal topic has one replica, and few partitions (50 by default each,
# which costs file handles and start-up time for nothing here).
offsets.topic.replication.factor=1
offsets.topic.num.partitions=8
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
share.coordinator.state.topic.num.partitions=4
# Consumers join a group at once instead of waiting 3 s for others.
group.initial.rebalance.delay.ms=0
# A 2-core machine shared with Cassandra and the tests.
num.network.threads=2
num.io.threads=2
background.threads=2
num.recovery.threads.per.data.dir=1
log.cleaner.threads=1
""")
        (conf / "log4j2.xml").write_text(_LOG4J2.format(file=self.log_dir / "server.log"))
        return conf

    def _format(self, lib: Path, conf: Path) -> None:
        """Format the log directory as a standalone KRaft quorum, once (a formatted directory
        keeps its cluster id, topics and messages)."""
        if (self.data_dir / "meta.properties").exists():
            return
        tools_log4j = lib.parent / "log4j2-tools.xml"
        if not tools_log4j.exists():
            tools_log4j.write_text(_TOOLS_LOG4J2)
        cmd = [java(), *TOOL_FLAGS, f"-Dlog4j2.configurationFile={tools_log4j}"]
        cmd += ["-cp", f"{lib}/*", "kafka.tools.StorageTool", "format", "--standalone"]
        cmd += ["--cluster-id", new_cluster_id(), "--config", str(conf / "server.properties")]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        except subprocess.TimeoutExpired as exc:
            raise ClusterError(f"formatting {self.data_dir} timed out") from exc
        if proc.returncode != 0:
            detail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            raise ClusterError(f"formatting {self.data_dir} failed: " + " | ".join(detail))

    def _java_command(self, lib: Path, conf: Path) -> list[str]:
        cmd = [java(), f"-Xmx{self.heap}", *SERVER_FLAGS]
        cmd += [
            f"-Dlog4j2.configurationFile={conf / 'log4j2.xml'}",
            f"-Dkafka.logs.dir={self.log_dir}",
            "-cp",
            f"{lib}/*",
            _MAIN_CLASS,
            str(conf / "server.properties"),
        ]
        return cmd

    # -- processes ------------------------------------------------------------------------
    def pid(self) -> int | None:
        """The recorded pid if that process is still this directory's broker JVM."""
        return recorded_pid(self.pid_file, _MAIN_CLASS, str(self.conf_dir / "server.properties"))

    def _running_ports(self) -> tuple[int, int]:
        """The ports the running broker was configured with (whatever port this object was
        given), else this object's."""
        return self._recorded_ports() or (self.port, self.controller_port)

    def status(self) -> BrokerStatus:
        pid = self.pid()
        port = self.port if pid is None else self._running_ports()[0]
        if pid is None:
            state = "down"
        elif any(node == NODE_ID for node, _, _ in metadata_brokers(HOST, port)):
            state = "up"
        else:
            state = "starting"
        return BrokerStatus(f"{HOST}:{port}", pid, state)

    def start(self, timeout: float | None = None) -> bool:
        """Start the broker unless it runs, and wait until it answers; False if it already did.

        The broker of this directory already running on another port is an error, as is
        another program holding one of the ports.
        """
        running = self.pid()
        if running is not None and self._running_ports()[0] != self.port:
            raise ClusterError(
                f"the broker in {self.directory} already runs on {HOST}:"
                f"{self._running_ports()[0]}: stop it before starting it on port {self.port}"
            )
        if running is None:
            # Fail on a missing JDK or a taken port before spending time on a download.
            java()
            for port in (self.port, self.controller_port):
                if _port_open(port):
                    raise ClusterError(
                        f"{HOST}:{port} is in use by a process this broker did not start "
                        f"(another broker? choose another port)"
                    )
            lib = self.ensure_distribution()
            conf = self._write_config()
            self._format(lib, conf)
            self.pid_file.unlink(missing_ok=True)
            pid = launch_detached(self._java_command(lib, conf), self.directory,
                                  self.log_dir / "stdout.log")
            self.pid_file.write_text(f"{pid}\n")
        elif self.status().state == "up":
            return False
        self._wait_up(self.start_timeout if timeout is None else timeout)
        return running is None

    def _wait_up(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status = self.status()
            if status.state == "up":
                return
            if status.pid is None and still_gone(self.pid):
                raise ClusterError(f"the Kafka broker exited during startup:\n{self._failure_log()}")
            if status.pid is None:
                continue
            time.sleep(0.25)
        raise ClusterError(
            f"the Kafka broker did not answer on {self.bootstrap_servers} within "
            f"{timeout:.0f}s:\n{self._failure_log()}"
        )

    def _failure_log(self) -> str:
        text = tail(self.log_dir / "server.log", 20)
        stdout = tail(self.log_dir / "stdout.log", 10)
        if stdout:  # JVM option errors and crashes only ever reach stdout
            text += ["--- stdout.log ---", *stdout]
        return "\n".join(text)

    def stop(self, timeout: float = STOP_TIMEOUT) -> bool:
        """SIGTERM the recorded JVM (Kafka shuts down cleanly on it), SIGKILL it if still alive
        after ``timeout``; False if it was not running. Never signals any other process."""
        pid = self.pid()
        if pid is not None:
            ports = self._running_ports()
            with contextlib.suppress(ProcessLookupError):  # it may have just exited by itself
                os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and self.pid() is not None:
                time.sleep(0.2)
            if self.pid() is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                for _ in range(50):
                    if self.pid() is None:
                        break
                    time.sleep(0.1)
            # The kernel may close a dead JVM's listening sockets a moment after the process
            # is gone; wait for that so an immediate restart can bind them.
            deadline = time.monotonic() + 10.0
            while time.monotonic() < deadline and any(map(_port_open, ports)):
                time.sleep(0.2)
        self.pid_file.unlink(missing_ok=True)
        return pid is not None

    def logs(self, lines: int = 50) -> str:
        return "\n".join(tail(self.log_dir / "server.log", lines))

    def __enter__(self) -> LocalKafka:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
