"""A real Apache Cassandra node for tests: the server jars from Maven, one node on 127.0.0.1.

`make` resolves `org.apache.cassandra:cassandra-all` (5.0.x, the line that
runs on Java 17) with its dependencies into the local Maven repository and
writes their classpath to `.venv/cassandra.classpath` (scripts/maven_deps.py,
checked against tests/harness/maven/cassandra.lock).  When Maven could not
resolve them it writes `.venv/cassandra.unavailable` with the reason instead;
`classpath()` then raises it, so the tests that need the server fail saying
which artifact was refused rather than being skipped quietly.

`CassandraServer` writes a cassandra.yaml of its own (one token, no auth,
free storage and native ports, data under a temp dir, no snapshots on
TRUNCATE/DROP, generous timeouts for a loaded 2-core machine) and starts
`CassandraDaemon` in the foreground with the `--add-exports/--add-opens`
options of Cassandra's jvm17-server.options, a small heap and one GC and
compiler thread.  It is ready when a CQL client can query `system.local`.
It is stopped by PID; `kill()` + `restart()` keep the data directory (a
crashed node recovers its commit log), which is how tests exercise an outage.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from tests.harness.procs import REPO, free_port, wait_for

CLASSPATH_FILE = REPO / ".venv" / "cassandra.classpath"
UNAVAILABLE_FILE = REPO / ".venv" / "cassandra.unavailable"
MAIN_CLASS = "org.apache.cassandra.service.CassandraDaemon"
#: Startup took 15 s alone and can take several times that on a shared, loaded machine.
START_TIMEOUT = 240.0

#: From Cassandra 5.0's conf/jvm17-server.options: the module openings it needs on Java 17.
JVM17_OPTIONS = (
    "-Djdk.attach.allowAttachSelf=true",
    *(f"--add-exports={m}=ALL-UNNAMED" for m in (
        "java.base/jdk.internal.misc", "java.management.rmi/com.sun.jmx.remote.internal.rmi",
        "java.rmi/sun.rmi.registry", "java.rmi/sun.rmi.server", "java.sql/java.sql",
        "java.base/java.lang.ref", "jdk.unsupported/sun.misc",
        "jdk.compiler/com.sun.tools.javac.file", "jdk.attach/sun.tools.attach")),
    *(f"--add-opens={m}=ALL-UNNAMED" for m in (
        "java.base/java.lang.module", "java.base/jdk.internal.loader",
        "java.base/jdk.internal.ref", "java.base/jdk.internal.reflect",
        "java.base/jdk.internal.math", "java.base/jdk.internal.module",
        "java.base/jdk.internal.util.jar", "jdk.management/com.sun.management.internal",
        "java.base/sun.nio.ch", "java.base/java.io", "java.base/java.lang.reflect",
        "jdk.compiler/com.sun.tools.javac", "java.base/java.lang", "java.base/java.util")),
    "-Dio.netty.tryReflectionSetAccessible=true",
)

#: A small node for tests: 512 MB heap, one GC/compiler thread, C1 only (faster start).
JVM_OPTIONS = ("-Xms256m", "-Xmx512m", "-Xss512k", "-XX:+UseG1GC", "-XX:ParallelGCThreads=1",
               "-XX:ConcGCThreads=1", "-XX:TieredStopAtLevel=1", "-XX:CICompilerCount=1",
               "-XX:+ExitOnOutOfMemoryError")

LOGBACK = """<configuration>
  <appender name="STDOUT" class="ch.qos.logback.core.ConsoleAppender">
    <encoder><pattern>%d{HH:mm:ss.SSS} %-5level [%thread] %logger{20} - %msg%n</pattern></encoder>
  </appender>
  <logger name="org.apache.cassandra.service.CassandraDaemon" level="INFO"/>
  <root level="WARN"><appender-ref ref="STDOUT"/></root>
</configuration>
"""


class CassandraUnavailable(RuntimeError):
    """The server's jars could not be resolved (the message names what Maven refused)."""


def classpath() -> str:
    """The server's classpath as `make` resolved it; CassandraUnavailable with the reason."""
    if UNAVAILABLE_FILE.exists():
        raise CassandraUnavailable(UNAVAILABLE_FILE.read_text().strip())
    if not CLASSPATH_FILE.exists():
        raise CassandraUnavailable(f"{CLASSPATH_FILE} is missing: run `make test` or `make "
                                   "bench` (they resolve Cassandra's server jars with Maven)")
    return CLASSPATH_FILE.read_text().strip()


def java() -> str:
    """The java binary (JAVA_HOME's if set)."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not found:
        raise CassandraUnavailable("no java on PATH (Cassandra 5.0 needs Java 17)")
    return found


class CassandraServer:
    """One Cassandra node on 127.0.0.1, owned by this process; start() then stop()."""

    def __init__(self, work_dir: Path | None = None) -> None:
        self.work_dir = work_dir or Path(tempfile.mkdtemp(prefix="peloton-cassandra-", dir="/tmp"))
        self._own_dir = work_dir is None
        self.port = 0
        self.storage_port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = self.work_dir / "server.log"

    @property
    def hosts(self) -> str:
        """`127.0.0.1:<native port>`, as PELOTON_TEST_CASSANDRA spells it."""
        return f"127.0.0.1:{self.port}"

    def url(self, keyspace: str) -> str:
        """A store URL for one keyspace of this node."""
        return f"cassandra://{self.hosts}/{keyspace}"

    # -- lifecycle ---------------------------------------------------------
    def start(self) -> CassandraServer:
        """Write the config, start the node and wait until CQL answers."""
        cp = classpath()
        self.port, self.storage_port = free_port(), free_port()
        (self.work_dir / "cassandra.yaml").write_text(self._yaml())
        (self.work_dir / "logback.xml").write_text(LOGBACK)
        self._launch(cp)
        return self

    def restart(self) -> None:
        """Start again on the same data directory and ports (after `kill`)."""
        assert self.proc is None, "restart needs a stopped node"
        self._launch(classpath())

    def _launch(self, cp: str) -> None:
        cmd = [java(), *JVM_OPTIONS, *JVM17_OPTIONS,
               f"-Dcassandra.config=file://{self.work_dir / 'cassandra.yaml'}",
               f"-Dlogback.configurationFile={self.work_dir / 'logback.xml'}",
               "-Dcassandra-foreground=yes",
               f"-Dcassandra.storagedir={self.work_dir / 'data'}",
               f"-Dcassandra.logdir={self.work_dir / 'logs'}",
               # One node: nothing to gossip with, so do not wait for gossip to settle.
               "-Dcassandra.skip_wait_for_gossip_to_settle=0",
               "-Dcassandra.load_ring_state=false",
               "-cp", cp, MAIN_CLASS]
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, cwd=self.work_dir,
                                     start_new_session=True)
        log.close()
        try:
            wait_for(self._ready, START_TIMEOUT, f"Cassandra on {self.hosts}", interval=0.5)
        except AssertionError:
            self.kill()
            raise AssertionError(f"Cassandra did not start within {START_TIMEOUT}s; "
                                 f"last log lines:\n{self.log_tail()}") from None

    def _ready(self) -> bool:
        if self.proc is None or self.proc.poll() is not None:
            raise RuntimeError(f"Cassandra exited with {self.proc and self.proc.returncode}; "
                                 f"last log lines:\n{self.log_tail()}")
        from cassandra.cluster import Cluster

        cluster = Cluster(["127.0.0.1"], port=self.port, protocol_version=4, connect_timeout=2)
        try:
            session = cluster.connect()
            session.execute("SELECT release_version FROM system.local")
            return True
        except Exception:
            return False
        finally:
            cluster.shutdown()

    def log_tail(self, lines: int = 40) -> str:
        """The end of the server's output."""
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def kill(self, sig: int = signal.SIGKILL, timeout: float = 60) -> None:
        """Signal the node (default: SIGKILL, a crash) and wait until it is gone."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)

    def stop(self) -> None:
        """Stop the node by PID (SIGTERM, then SIGKILL) and remove its files.  Idempotent."""
        self.kill(signal.SIGTERM, timeout=30)
        if self._own_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def _yaml(self) -> str:
        data = self.work_dir / "data"
        return f"""\
cluster_name: peloton-test
num_tokens: 1
initial_token: 0
partitioner: org.apache.cassandra.dht.Murmur3Partitioner
endpoint_snitch: SimpleSnitch
seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: "127.0.0.1:{self.storage_port}"
listen_address: 127.0.0.1
rpc_address: 127.0.0.1
storage_port: {self.storage_port}
native_transport_port: {self.port}
start_native_transport: true
authenticator: AllowAllAuthenticator
authorizer: AllowAllAuthorizer
data_file_directories: [{data}/data]
commitlog_directory: {data}/commitlog
saved_caches_directory: {data}/saved_caches
hints_directory: {data}/hints
cdc_raw_directory: {data}/cdc_raw
# A write is acknowledged once its commit log entry is on disk (group sync, 2 ms windows):
# the crash tests kill -9 the node and expect every acknowledged write back.  (`periodic`,
# Cassandra's default, acknowledges first and relies on replicas; one node has none.)
commitlog_sync: group
commitlog_sync_group_window: 2ms
# Tests truncate and drop often: no snapshot each time.
auto_snapshot: false
hinted_handoff_enabled: false
concurrent_compactors: 1
# A loaded 2-core machine can stall a request for seconds; the client retries timeouts.
read_request_timeout: 20000ms
range_request_timeout: 20000ms
write_request_timeout: 20000ms
counter_write_request_timeout: 20000ms
cas_contention_timeout: 10000ms
truncate_request_timeout: 120000ms
request_timeout: 30000ms
"""


@contextlib.contextmanager
def running_cassandra(work_dir: Path | None = None) -> Iterator[CassandraServer]:
    """A started node, stopped on exit."""
    server = CassandraServer(work_dir)
    server.start()
    try:
        yield server
    finally:
        server.stop()


if __name__ == "__main__":  # `python -m tests.harness.cassandra`: start one and wait
    with running_cassandra() as node:
        print(f"Cassandra on {node.hosts} (PELOTON_TEST_CASSANDRA={node.hosts}); Ctrl-C stops it")
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                time.sleep(3600)
