"""Local Apache Cassandra 5.0 cluster manager for development and tests, in the spirit of ccm: it
fetches ``org.apache.cassandra:cassandra-all`` and its runtime dependencies from Maven Central with
``mvn`` into a cached ``dist-<version>/lib`` directory, writes a small per-node configuration sized
for a laptop-class machine, runs every node as a detached JVM on its own loopback address
(127.0.0.1, 127.0.0.2, ...) with the shared CQL port 9042, starts nodes one at a time until each
answers a CQL query, and stops only the processes it recorded; the only prerequisites are a Java 17
JDK and Maven.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import time
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

CQL_PORT = 9042
STORAGE_PORT = 7000
JMX_BASE_PORT = 7199
# Local JMX always binds 127.0.0.1, so each loopback slot gets its own port: 7199, 7299, ...
MAX_SLOT = 30
DEFAULT_START_TIMEOUT = 180.0
STOP_TIMEOUT = 60.0
# Maven picks the newest release in this range, so "5.0.x latest" needs no hard-coded list.
VERSION_RANGE = "[5.0.0,5.0.9999]"
DATA_DIRS = ("data", "commitlog", "saved_caches", "hints", "cdc_raw", "triggers")

# GC and stack settings from Cassandra's jvm-server.options and jvm17-server.options (heap pages
# touched at start, as there); a node that runs out of heap should die at once rather than limp
# along and hang the tests using it. Regions of 16 MB: chunk cells are up to 1 MiB, and with the
# default regions (1 MB for a 1 GB heap) every such cell read or written is a humongous object,
# allocated outside the young generation and starting concurrent marking cycles (a GDELT read of
# every column, 133 MB of chunks: the node's CPU 0.88-0.92 s -> 0.70-0.87 s with mmap below; for
# a 1M-row append, 0.58-0.67 s -> 0.45-0.62 s).
SERVER_FLAGS = (
    "-Xss256k -XX:+UseG1GC -XX:+ParallelRefProcEnabled -XX:MaxTenuringThreshold=1 "
    "-XX:MaxGCPauseMillis=300 -XX:G1HeapRegionSize=16m -XX:+AlwaysPreTouch "
    "-XX:+ExitOnOutOfMemoryError -XX:+PerfDisableSharedMem"
).split()

# The node's timer slack (Linux's default is 50 us). Between tasks, the request threads of
# Cassandra's shared pool sleep in parkNanos of 10 us to 1 ms and look for work again, so a node
# serving a steady stream of reads wakes tens of thousands of times a second for nothing (a
# profile of a read of every GDELT column: 30% of the node's CPU in SEPWorker.doWaitSpin, mostly
# context switches; work is still handed to a sleeping thread at once, by an unpark). With 200 us
# the kernel ends those sleeps less often: the node's CPU for that read 0.49-0.58 s -> 0.35-0.45 s,
# and Q2 on Cassandra 1.59-1.86x -> 1.37-1.47x DuckDB over Parquet. 5 ms and more made queries
# slower (timed waits on the request path ran late).
NODE_TIMER_SLACK_NS = 200_000

# Module flags from Cassandra 5.0's conf/jvm17-server.options (JPMS and Netty sections); without
# them Java 17 refuses the reflective access Cassandra, Netty and Chronicle rely on.
JAVA17_FLAGS: tuple[str, ...] = (
    "-Djdk.attach.allowAttachSelf=true",
    "--add-exports", "java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-exports", "java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-exports", "java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-exports", "java.management.rmi/com.sun.jmx.remote.internal.rmi=ALL-UNNAMED",
    "--add-exports", "java.rmi/sun.rmi.registry=ALL-UNNAMED",
    "--add-exports", "java.rmi/sun.rmi.server=ALL-UNNAMED",
    "--add-exports", "java.sql/java.sql=ALL-UNNAMED",
    "--add-exports", "java.base/java.lang.ref=ALL-UNNAMED",
    "--add-exports", "jdk.unsupported/sun.misc=ALL-UNNAMED",
    "--add-opens", "java.base/java.lang.module=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.loader=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.reflect=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.math=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.module=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.util.jar=ALL-UNNAMED",
    "--add-opens", "jdk.management/com.sun.management.internal=ALL-UNNAMED",
    "--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens", "java.base/java.io=ALL-UNNAMED",
    "--add-opens", "java.base/java.nio=ALL-UNNAMED",
    "--add-opens", "java.base/java.lang.reflect=ALL-UNNAMED",
    "--add-opens", "java.base/java.lang=ALL-UNNAMED",
    "--add-opens", "java.base/java.util=ALL-UNNAMED",
    "-Dio.netty.tryReflectionSetAccessible=true",
    "-Dio.netty.allocator.useCacheForAllThreads=true",
    "-Dio.netty.allocator.maxOrder=11",
)  # fmt: skip

_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.colonnade</groupId>
  <artifactId>cassandra-dist</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.cassandra</groupId>
      <artifactId>cassandra-all</artifactId>
      <version>{version}</version>
    </dependency>
  </dependencies>
</project>
"""


def _pom(version: str) -> str:
    return _POM.format(version=version)


_LOGBACK = """<configuration scan="false">
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>{file}</file>
    <encoder><pattern>%-5level [%thread] %date{{ISO8601}} %F:%L - %msg%n</pattern></encoder>
  </appender>
  <logger name="org.apache.cassandra" level="INFO"/>
  <root level="WARN"><appender-ref ref="FILE"/></root>
</configuration>
"""

_TOOLS_LOGBACK = """<configuration scan="false">
  <appender name="STDERR" class="ch.qos.logback.core.ConsoleAppender">
    <target>System.err</target>
    <encoder><pattern>%-5level %msg%n</pattern></encoder>
  </appender>
  <root level="WARN"><appender-ref ref="STDERR"/></root>
</configuration>
"""


@dataclass(frozen=True)
class NodeStatus:
    node: int
    address: str
    pid: int | None
    state: str  # 'up' (answers CQL), 'starting' (JVM alive, CQL not yet) or 'down'


def default_directory() -> Path:
    env = os.environ.get("COLONNADE_CASSANDRA_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "colonnade" / "cassandra"


def _cql_request(sock: socket.socket, opcode: int, body: bytes) -> tuple[int, bytes]:
    # Native protocol v4 frame: version, flags, stream, opcode, body length.
    sock.sendall(struct.pack(">BBhBi", 0x04, 0, 0, opcode, len(body)) + body)

    def read(n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("connection closed")
            buf += chunk
        return buf

    _, _, _, op, length = struct.unpack(">BBhBi", read(9))
    return op, read(length)


def cql_ready(
    address: str,
    port: int = CQL_PORT,
    credentials: tuple[str, str] | None = None,
    timeout: float = 3.0,
) -> bool:
    """True when the node completes STARTUP (and login) and answers a query on system.local.

    A bare TCP connect is not enough: the port opens before auth and schema are usable.
    """
    try:
        with socket.create_connection((address, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            pairs = {"CQL_VERSION": "3.0.0"}
            body = struct.pack(">H", len(pairs)) + b"".join(
                struct.pack(">H", len(k)) + k.encode() + struct.pack(">H", len(v)) + v.encode()
                for k, v in pairs.items()
            )
            op, _ = _cql_request(sock, 0x01, body)  # STARTUP
            if op == 0x03:  # AUTHENTICATE: PasswordAuthenticator wants a SASL PLAIN token
                if credentials is None:
                    return False
                token = b"\0" + credentials[0].encode() + b"\0" + credentials[1].encode()
                op, _ = _cql_request(sock, 0x0F, struct.pack(">i", len(token)) + token)
                if op != 0x10:  # AUTH_SUCCESS
                    return False
            elif op != 0x02:  # READY
                return False
            query = b"SELECT release_version FROM system.local"
            op, _ = _cql_request(
                sock, 0x07, struct.pack(">i", len(query)) + query + struct.pack(">HB", 0x0001, 0)
            )  # QUERY at ONE
            return op == 0x08  # RESULT
    except (OSError, struct.error):
        return False


class LocalCluster:
    """A Cassandra cluster living under one directory, node i on 127.0.0.(address_offset + i).

    ``address_offset`` lets a throwaway cluster run beside another one (say a test cluster
    next to a development cluster on 127.0.0.1), since addresses and JMX ports are fixed per slot.
    """

    def __init__(
        self,
        directory: Path | None = None,
        nodes: int = 1,
        heap: str = "1G",
        version: str | None = None,
        *,
        auth: bool = False,
        cache_dir: Path | None = None,
        address_offset: int = 0,
        start_timeout: float = DEFAULT_START_TIMEOUT,
    ) -> None:
        if nodes < 1 or address_offset < 0 or address_offset + nodes > MAX_SLOT:
            raise ClusterError(
                f"need nodes >= 1 and address_offset + nodes <= {MAX_SLOT}, got "
                f"nodes={nodes}, address_offset={address_offset}"
            )
        self.directory = Path(directory) if directory is not None else default_directory()
        # The jar download is shared: a throwaway cluster directory still reuses the cache.
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_directory()
        self.nodes = nodes
        self.heap = heap
        self.version = version  # None until resolved: newest cached or newest on Maven Central
        self.auth = auth
        self.credentials = ("cassandra", "cassandra") if auth else None
        self.address_offset = address_offset
        self.start_timeout = start_timeout

    # -- layout ---------------------------------------------------------------------------
    def address(self, node: int) -> str:
        return f"127.0.0.{self.address_offset + node}"

    def jmx_port(self, node: int) -> int:
        return JMX_BASE_PORT + (self.address_offset + node - 1) * 100

    @property
    def contact_points(self) -> list[str]:
        return [self.address(i) for i in range(1, self.nodes + 1)]

    def node_dir(self, node: int) -> Path:
        return self.directory / "nodes" / f"node{node}"

    def _check(self, node: int) -> None:
        if not 1 <= node <= self.nodes:
            raise ClusterError(f"no node {node}: this cluster has nodes 1..{self.nodes}")

    # -- distribution ---------------------------------------------------------------------
    def ensure_distribution(self) -> Path:
        """Return the lib/ directory holding cassandra-all and its runtime jars, fetching if needed."""
        if self.version is None:
            self.version = cached_version(self.cache_dir, "5.0.")
        self.version, lib = fetch_distribution(
            self.cache_dir, self.version or VERSION_RANGE, _pom, "cassandra-all"
        )
        return lib

    # -- configuration --------------------------------------------------------------------
    def _write_config(self, node: int) -> Path:
        nd = self.node_dir(node)
        conf = nd / "conf"
        conf.mkdir(parents=True, exist_ok=True)
        (nd / "logs").mkdir(exist_ok=True)
        for name in DATA_DIRS:
            (nd / name).mkdir(exist_ok=True)
        q = {name: json.dumps(str(nd / name)) for name in DATA_DIRS}  # JSON strings are valid YAML
        if self.auth:
            authn, authz = "PasswordAuthenticator", "CassandraAuthorizer"
        else:
            authn, authz = "AllowAllAuthenticator", "AllowAllAuthorizer"
        addr = self.address(node)
        (conf / "cassandra.yaml").write_text(f"""\
cluster_name: colonnade
num_tokens: 16
allocate_tokens_for_local_replication_factor: {min(self.nodes, 3)}
partitioner: org.apache.cassandra.dht.Murmur3Partitioner
endpoint_snitch: SimpleSnitch
seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: "{self.address(1)}:{STORAGE_PORT}"
listen_address: {addr}
rpc_address: {addr}
storage_port: {STORAGE_PORT}
native_transport_port: {CQL_PORT}
start_native_transport: true
storage_compatibility_mode: NONE
data_file_directories: [{q["data"]}]
commitlog_directory: {q["commitlog"]}
saved_caches_directory: {q["saved_caches"]}
hints_directory: {q["hints"]}
cdc_raw_directory: {q["cdc_raw"]}
authenticator:
  class_name: {authn}
authorizer:
  class_name: {authz}
role_manager:
  class_name: CassandraRoleManager
network_authorizer:
  class_name: AllowAllNetworkAuthorizer
commitlog_sync: periodic
commitlog_sync_period: 10000ms
commitlog_segment_size: 32MiB
commitlog_total_space: 512MiB
# On-heap memtables (a quarter of the heap by default) and small caches: several nodes
# share a 2-core, 24 GiB machine.
memtable_allocation_type: heap_buffers
key_cache_size: 16MiB
row_cache_size: 128MiB  # used only by tables that ask for it (caching rows_per_partition)
counter_cache_size: 8MiB
concurrent_reads: 8
concurrent_writes: 8
concurrent_counter_writes: 8
concurrent_compactors: 1
compaction_throughput: 0MiB/s
# Data files mapped, not read through buffers (5.0's default maps only the indexes): chunk cells
# are large, and a scan reads them whole.
disk_access_mode: mmap
# Snapshots on drop/truncate only cost disk and time in a scratch cluster.
auto_snapshot: false
incremental_backups: false
snapshot_before_compaction: false
# A busy single machine is slower than a real cluster; avoid spurious timeouts.
read_request_timeout: 10000ms
range_request_timeout: 20000ms
write_request_timeout: 5000ms
request_timeout: 20000ms
""")
        (conf / "logback.xml").write_text(_LOGBACK.format(file=nd / "logs" / "system.log"))
        return conf

    def _java_command(self, node: int, lib: Path, conf: Path) -> list[str]:
        nd = self.node_dir(node)
        heap = [f"-Xms{self.heap}", f"-Xmx{self.heap}"]
        cmd = [java(), *heap, *SERVER_FLAGS, *JAVA17_FLAGS]
        jamm = sorted(lib.glob("jamm-*.jar"))
        if jamm:  # Cassandra measures memtable sizes through the jamm agent, as its launcher does
            cmd.append(f"-javaagent:{jamm[-1]}")
        cmd += [
            f"-Dcassandra.config={(conf / 'cassandra.yaml').as_uri()}",
            f"-Dlogback.configurationFile={conf / 'logback.xml'}",
            f"-Dcassandra.logdir={nd / 'logs'}",
            f"-Dcassandra.storagedir={nd}",
            # Any value keeps stdout open (it is closed when the property is unset).
            "-Dcassandra-foreground=no",
            f"-Dcassandra.jmx.local.port={self.jmx_port(node)}",
            "-Dcom.sun.management.jmxremote.authenticate=false",
            "-Djava.net.preferIPv4Stack=true",
            f"-Dcassandra.triggers_dir={nd / 'triggers'}",
            "-Dcassandra.skip_wait_for_gossip_to_settle=0",
            # The default 30 s ring delay is paid by every start and every join; a single
            # loopback machine propagates gossip in well under a second.
            f"-Dcassandra.ring_delay_ms={1000 if self.nodes == 1 else 5000}",
            "-Dcassandra.superuser_setup_delay_ms=0",
            "-cp",
            f"{lib}/*:{conf}",
            "org.apache.cassandra.service.CassandraDaemon",
        ]
        return cmd

    # -- processes ------------------------------------------------------------------------
    def _pid(self, node: int) -> int | None:
        """The recorded pid if that process is still this node's JVM (guards against pid reuse)."""
        conf = str(self.node_dir(node) / "conf")
        return recorded_pid(self.node_dir(node) / "pid", "CassandraDaemon", conf)

    def _state(self, node: int) -> tuple[int | None, str]:
        pid = self._pid(node)
        if pid is None:
            return None, "down"
        if cql_ready(self.address(node), credentials=self.credentials):
            return pid, "up"
        return pid, "starting"

    def status(self) -> list[NodeStatus]:
        return [NodeStatus(i, self.address(i), *self._state(i)) for i in range(1, self.nodes + 1)]

    def start(self, timeout: float | None = None) -> None:
        """Start every node that is not running, one at a time, and wait until all answer CQL."""
        # Cassandra needs nodes to join one by one; node1 is the seed and goes first.
        for node in range(1, self.nodes + 1):
            self.start_node(node, timeout=timeout)

    def start_node(self, node: int, *, wait: bool = True, timeout: float | None = None) -> None:
        self._check(node)
        pid, state = self._state(node)
        if state == "up":
            return
        if pid is None:
            java()  # fail on a missing JDK before spending time on a download
            lib = self.ensure_distribution()
            busy = self._busy_port(node)
            if busy is not None:
                raise ClusterError(
                    f"node{node}: {busy} is in use by a process this cluster did "
                    f"not start (another cluster? try address_offset)"
                )
            conf = self._write_config(node)
            nd = self.node_dir(node)
            (nd / "pid").unlink(missing_ok=True)
            cmd = self._java_command(node, lib, conf)
            pid = launch_detached(cmd, nd, nd / "logs" / "stdout.log", timer_slack_ns=NODE_TIMER_SLACK_NS)
            (nd / "pid").write_text(f"{pid}\n")
        if wait:
            self._wait_up(node, self.start_timeout if timeout is None else timeout)

    def _busy_port(self, node: int) -> str | None:
        """The first of the node's ports that still accepts connections, as host:port."""
        addr = self.address(node)
        for host, port in (
            (addr, CQL_PORT),
            (addr, STORAGE_PORT),
            ("127.0.0.1", self.jmx_port(node)),
        ):
            with socket.socket() as probe:
                probe.settimeout(1.0)
                if probe.connect_ex((host, port)) == 0:
                    return f"{host}:{port}"
        return None

    def _wait_up(self, node: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pid, state = self._state(node)
            if state == "up":
                return
            if pid is None and still_gone(lambda: self._pid(node)):
                raise ClusterError(f"node{node} exited during startup:\n{self._failure_log(node)}")
            if pid is None:
                continue
            time.sleep(1.0)
        pid, _ = self._state(node)
        still = (
            f"; it is still starting (pid {pid}) and will answer when done: `colonnade cassandra "
            f"status` shows when, `colonnade cassandra stop` stops it"
            if pid is not None
            else ""
        )
        raise ClusterError(
            f"node{node} did not answer CQL on {self.address(node)}:{CQL_PORT} "
            f"within {timeout:.0f}s{still}:\n{self._failure_log(node)}"
        )

    def _failure_log(self, node: int) -> str:
        logs = self.node_dir(node) / "logs"
        text = tail(logs / "system.log", 20)
        stdout = tail(logs / "stdout.log", 10)
        if stdout:  # JVM option errors and crashes only ever reach stdout
            text += ["--- stdout.log ---", *stdout]
        return "\n".join(text)

    def stop(self, node: int | None = None, timeout: float = STOP_TIMEOUT) -> None:
        """SIGTERM the recorded JVMs (Cassandra drains on it), SIGKILL any still alive after timeout."""
        targets = [node] if node is not None else list(range(1, self.nodes + 1))
        for n in targets:
            self._check(n)
        running = {n: pid for n in targets if (pid := self._pid(n)) is not None}
        for pid in running.values():
            with contextlib.suppress(ProcessLookupError):  # it may have just exited by itself
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and any(self._pid(n) for n in running):
            time.sleep(0.5)
        for n in running:
            pid = self._pid(n)
            if pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                for _ in range(50):
                    if self._pid(n) is None:
                        break
                    time.sleep(0.1)
        # The kernel may close a dead JVM's listening sockets a moment after the process is
        # gone; wait for that so an immediate restart can bind them.
        deadline = time.monotonic() + 10.0
        while running and time.monotonic() < deadline and any(map(self._busy_port, running)):
            time.sleep(0.2)
        for n in targets:
            (self.node_dir(n) / "pid").unlink(missing_ok=True)

    def stop_node(self, node: int, timeout: float = STOP_TIMEOUT) -> None:
        self.stop(node, timeout)

    def logs(self, node: int, lines: int = 50) -> str:
        self._check(node)
        return "\n".join(tail(self.node_dir(node) / "logs" / "system.log", lines))

    def clear(self) -> None:
        """Stop every node and delete all data, commit logs, caches and hints (logs are kept)."""
        self.stop()
        for nd in (self.directory / "nodes").glob("node*"):
            for name in DATA_DIRS:
                shutil.rmtree(nd / name, ignore_errors=True)

    def nodetool(self, node: int, *args: str, timeout: float = 300.0) -> str:
        """Run ``nodetool <args>`` against the node's local JMX port and return its output."""
        self._check(node)
        lib = self.ensure_distribution()
        tools_logback = lib.parent / "logback-tools.xml"
        if not tools_logback.exists():
            tools_logback.write_text(_TOOLS_LOGBACK)
        cmd = [java(), "-Xmx256m", "-XX:+UseSerialGC", *JAVA17_FLAGS]
        cmd += [f"-Dlogback.configurationFile={tools_logback}", "-cp", f"{lib}/*"]
        cmd += ["org.apache.cassandra.tools.NodeTool", "-h", "127.0.0.1"]
        cmd += ["-p", str(self.jmx_port(node)), *args]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise ClusterError(f"nodetool {' '.join(args)} on node{node} timed out") from exc
        if proc.returncode != 0:
            detail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
            raise ClusterError(
                f"nodetool {' '.join(args)} on node{node} failed: " + " | ".join(detail)
            )
        return proc.stdout

    def __enter__(self) -> LocalCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
