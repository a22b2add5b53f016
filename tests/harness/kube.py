"""A real Kubernetes control plane for tests: etcd, kube-apiserver and kwok's fake nodes on 127.0.0.1.

Nothing is faked at the API: the kube-apiserver is the real v1.34 binary on a real etcd, with
RBAC on and bearer-token authentication, so clients see real validation, admission, watches,
conflicts and 403s.  Only the kubelets are fake: kwok (sigs.k8s.io/kwok) plays the nodes
annotated `kwok.x-k8s.io/node: fake` by the stages in tests/harness/kwok_stages.yaml (nodes go
Ready, bound pods go Running, annotated pods end, wait or are deleted; see that file for the
annotations and their value formats).  No kube-controller-manager and no kube-scheduler run:
pods are created already bound (spec.nodeName) or bound through the Binding API by the code
under test, and nothing garbage-collects, marks nodes unreachable or creates ServiceAccounts.

The binaries come from scripts/k8s_binaries.sh, which builds them once from pinned versions
through the Go module proxy into a cache outside the repository (`ensure_binaries`).

Choices worth knowing:
- The ServiceAccount admission plugin is disabled: without the controller-manager no namespace
  gets its `default` ServiceAccount, and the plugin would refuse every pod.  So pods get no
  serviceAccountName default and no token volume; ServiceAccounts and their tokens still work
  (`token_for_service_account` uses the TokenRequest API).
- The TaintNodesByCondition admission plugin is disabled too: it taints every new Node
  `node.kubernetes.io/not-ready:NoSchedule`, and only the controller-manager's node lifecycle
  controller would lift it, so every node would stay unschedulable.  Taints are the test's own.
- The serving certificate is a self-signed one made with openssl (IP SAN 127.0.0.1); kubeconfigs
  name it as their CA, so clients verify TLS and urllib3 has nothing to warn about.
- etcd runs with --unsafe-no-fsync: tests survive process restarts (restart_apiserver), never
  power cuts, and fsync is the slowest thing a CI disk does.
- kwok's node leases are off (--node-lease-duration-seconds=0): nothing reads them without the
  controller-manager, and at 5,000 nodes they cost a core while idle.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from tests.harness.kube_nodes import FAKE_NODE_ANNOTATION, FakeNodes
from tests.harness.procs import REPO, free_port, stop

K8S_VERSION = "v1.34.4"
ETCD_VERSION = "v3.6.17"
KWOK_VERSION = "v0.8.0"
#: Must match scripts/k8s_binaries.sh, which builds and caches the binaries under this key.
CACHE_KEY = f"k8s-{K8S_VERSION}_etcd-{ETCD_VERSION}_kwok-{KWOK_VERSION}"
BUILD_SCRIPT = REPO / "scripts" / "k8s_binaries.sh"
BINARIES = ("kube-apiserver", "etcd", "kwok", "kubectl")
STAGES = Path(__file__).with_name("kwok_stages.yaml")

#: Pod annotations read by the kwok stages (values are strings; formats in kwok_stages.yaml).
EXIT_CODE_ANNOTATION = "pelotonpy.dev/fake-exit-code"
RUN_SECS_ANNOTATION = "pelotonpy.dev/fake-run-secs"
REASON_ANNOTATION = "pelotonpy.dev/fake-reason"
MESSAGE_ANNOTATION = "pelotonpy.dev/fake-message"
WAITING_REASON_ANNOTATION = "pelotonpy.dev/fake-waiting-reason"
WAITING_MESSAGE_ANNOTATION = "pelotonpy.dev/fake-waiting-message"

#: Pod IPs kwok hands out; node InternalIPs (kube_nodes.NODE_IP_BASE) are the other half of 10/8.
POD_CIDR = "10.0.0.0/9"
FALLBACK_NODE_IP = "10.255.255.254"

START_TIMEOUT = 60.0
#: Start attempts per process: a port free a moment ago can be taken by the time the server binds.
BIND_ATTEMPTS = 5
#: What etcd, kube-apiserver and kwok (all Go) log when a listener cannot bind.
BIND_ERROR = "address already in use"
BUILD_TIMEOUT = 3600.0


def cache_bin_dir() -> Path:
    """Where scripts/k8s_binaries.sh puts the binaries (the same rule as the script)."""
    root = os.environ.get("PELOTON_K8S_CACHE")
    if not root:
        cache_home = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        root = str(Path(cache_home) / "pelotonpy" / "k8s")
    return Path(root) / CACHE_KEY / "bin"


def ensure_binaries() -> Path:
    """The directory holding kube-apiserver, etcd, kwok and kubectl, built first if missing.

    A clean clone builds them on first use (about 5 minutes on 2 cores, then cached outside the
    repository).  No Go toolchain is an error naming what to install, never a skip.
    """
    bin_dir = cache_bin_dir()
    if all((bin_dir / name).is_file() for name in BINARIES):
        return bin_dir
    if shutil.which("go") is None:
        raise RuntimeError(
            f"the Kubernetes test binaries are not built ({bin_dir}) and there is no Go toolchain to "
            "build them: install Go 1.26 or newer (https://go.dev/dl/; kwok v0.8.0 needs 1.26), then "
            f"run `make k8s-binaries` or {BUILD_SCRIPT}")
    result = subprocess.run([str(BUILD_SCRIPT)], capture_output=True, text=True, timeout=BUILD_TIMEOUT,
                            check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{BUILD_SCRIPT} failed ({result.returncode}):\n"
                           f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    built = Path(result.stdout.strip().splitlines()[-1])
    missing = [name for name in BINARIES if not (built / name).is_file()]
    if missing:
        raise RuntimeError(f"{BUILD_SCRIPT} did not produce {missing} in {built}")
    return built


def _openssl(*args: str, cwd: Path) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        raise RuntimeError("openssl is needed for the test control plane's keys "
                           "(Debian: apt-get install openssl)")
    subprocess.run([openssl, *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _log_tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


class StartError(RuntimeError):
    """A control-plane process did not become ready; the message ends with its log's tail."""


class KubeControlPlane:
    """etcd + kube-apiserver + kwok, each a child process on 127.0.0.1 with its log in `base_dir`.

    `start()` returns self; `stop()` ends everything by PID.  `url` and `admin_kubeconfig`
    point clients at the API server; `api()` is an admin `kubernetes.client.ApiClient`.
    """

    def __init__(self, base_dir: Path) -> None:
        self.base_dir = base_dir
        self.bin_dir: Path | None = None
        self.admin_token = secrets.token_hex(24)
        self.etcd_port = 0
        self.etcd_peer_port = 0
        self.apiserver_port = 0
        self.kwok_port = 0
        self.admin_kubeconfig = base_dir / "admin.kubeconfig"
        self.ca_file = base_dir / "pki" / "serving.crt"
        #: Seconds the last start() took, from launching etcd to kwok serving.
        self.startup_seconds = 0.0
        self._procs: dict[str, subprocess.Popen[str]] = {}
        self._api: Any = None
        #: The kwok-played Nodes of this control plane (tests.harness.kube_nodes).
        self.nodes = FakeNodes(self.api)

    # -- addresses -----------------------------------------------------------------------
    @property
    def url(self) -> str:
        """The API server's address, `https://127.0.0.1:<port>`."""
        return f"https://127.0.0.1:{self.apiserver_port}"

    @property
    def etcd_url(self) -> str:
        """etcd's client address, `http://127.0.0.1:<port>`."""
        return f"http://127.0.0.1:{self.etcd_port}"

    @property
    def pids(self) -> dict[str, int]:
        """PIDs of the running processes by name: etcd, kube-apiserver, kwok."""
        return {name: proc.pid for name, proc in self._procs.items() if proc.poll() is None}

    def log_path(self, name: str) -> Path:
        """The log file of process `name` (etcd, kube-apiserver, kwok)."""
        return self.base_dir / f"{name}.log"

    def binary(self, name: str) -> Path:
        """The path of one built binary (kubectl, for example), building them if needed."""
        if self.bin_dir is None:
            self.bin_dir = ensure_binaries()
        return self.bin_dir / name

    # -- lifecycle -----------------------------------------------------------------------
    def start(self) -> KubeControlPlane:
        """Start etcd, kube-apiserver and kwok; return once /readyz is ok and kwok serves."""
        self.bin_dir = ensure_binaries()
        self.base_dir.mkdir(parents=True, exist_ok=True)
        began = time.monotonic()
        try:
            self._write_credentials()
            self._start_etcd()
            self._start_apiserver(fixed_port=False)
            self._write_kubeconfig(self.admin_kubeconfig, self.admin_token)
            self._start_kwok()
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        return self

    def stop(self) -> None:
        """Stop kwok, kube-apiserver and etcd by PID (SIGTERM, SIGKILL after a deadline)."""
        for name in ("kwok", "kube-apiserver", "etcd"):
            proc = self._procs.pop(name, None)
            if proc is not None:
                stop(proc, timeout=20)
        if self._api is not None:
            self._api.close()
            self._api = None

    def restart_apiserver(self) -> None:
        """Stop the API server by PID (if it runs) and start it again on the same port and etcd."""
        proc = self._procs.pop("kube-apiserver", None)
        if proc is not None:
            stop(proc, timeout=30)
        self._start_apiserver(fixed_port=True)

    def kill_apiserver(self) -> None:
        """SIGKILL the API server (an outage); `restart_apiserver()` brings it back."""
        proc = self._procs.pop("kube-apiserver", None)
        if proc is not None:
            stop(proc, sig=signal.SIGKILL, timeout=10)

    # -- starting each process -----------------------------------------------------------
    def _write_credentials(self) -> None:
        pki = self.base_dir / "pki"
        pki.mkdir(exist_ok=True)
        # Kept across restart_apiserver(): clients' kubeconfigs and issued tokens stay valid.
        if not (pki / "sa.key").exists():
            _openssl("genrsa", "-out", "sa.key", "2048", cwd=pki)
            _openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=pki)
        if not self.ca_file.exists():
            _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "3650",
                     "-keyout", "serving.key", "-out", "serving.crt", "-subj", "/CN=kube-apiserver",
                     "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost", cwd=pki)
        # token,user,uid,"groups": system:masters is bound to cluster-admin by RBAC's bootstrap.
        (pki / "tokens.csv").write_text(f'{self.admin_token},admin,admin,"system:masters"\n')

    def _launch(self, name: str, argv: Sequence[str]) -> subprocess.Popen[str]:
        log_path = self.log_path(name)
        with log_path.open("a") as log:
            log.write(f"\n==== {time.strftime('%Y-%m-%dT%H:%M:%S')} {' '.join(argv)}\n")
            log.flush()
            proc = subprocess.Popen(list(argv), stdout=log, stderr=subprocess.STDOUT, text=True,
                                    cwd=self.base_dir, start_new_session=True)
        self._procs[name] = proc
        return proc

    def _start_with_retries(self, name: str, attempt: Callable[[], list[str]],
                            ready: Callable[[], bool]) -> None:
        """Launch `name` (argv from `attempt()`, which picks ports) until `ready()`.

        A start that exits with a bind error is retried with new ports (`attempt()` is called
        again); any other exit, or no readiness in START_TIMEOUT, raises StartError with the log.
        """
        log_path = self.log_path(name)
        for number in range(1, BIND_ATTEMPTS + 1):
            log_start = log_path.stat().st_size if log_path.exists() else 0
            proc = self._launch(name, attempt())
            deadline = time.monotonic() + START_TIMEOUT
            while time.monotonic() < deadline and proc.poll() is None and not ready():
                time.sleep(0.1)
            if proc.poll() is None and ready():
                return
            if proc.poll() is None:
                self._procs.pop(name, None)
                stop(proc, timeout=10)
                raise StartError(f"{name} was not ready within {START_TIMEOUT}s; "
                                 f"{log_path}:\n{_log_tail(log_path)}")
            self._procs.pop(name, None)
            with log_path.open(errors="replace") as log:
                log.seek(log_start)
                output = log.read()
            if BIND_ERROR in output and number < BIND_ATTEMPTS:
                # A fixed port (restart_apiserver) may be held a moment longer by the old process.
                time.sleep(0.5)
                continue
            raise StartError(f"{name} exited with {proc.returncode} (attempt {number}); "
                             f"{log_path}:\n{_log_tail(log_path)}")

    def _start_etcd(self) -> None:
        bin_dir = self.bin_dir
        assert bin_dir is not None
        data_dir = self.base_dir / "etcd-data"

        def argv() -> list[str]:
            # A failed attempt may have initialised the data dir with its peer URL: start afresh.
            shutil.rmtree(data_dir, ignore_errors=True)
            self.etcd_port, self.etcd_peer_port = free_port(), free_port()
            peer = f"http://127.0.0.1:{self.etcd_peer_port}"
            return [str(bin_dir / "etcd"), "--name=test", f"--data-dir={data_dir}",
                    f"--listen-client-urls={self.etcd_url}", f"--advertise-client-urls={self.etcd_url}",
                    f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}",
                    f"--initial-cluster=test={peer}", "--initial-cluster-state=new",
                    "--unsafe-no-fsync", "--log-level=warn"]

        self._start_with_retries("etcd", argv, self._etcd_healthy)

    def _etcd_healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.etcd_url}/health", timeout=2) as reply:
                return bool(json.loads(reply.read()).get("health") == "true")
        except (OSError, ValueError):
            return False

    def _start_apiserver(self, *, fixed_port: bool) -> None:
        bin_dir = self.bin_dir
        assert bin_dir is not None
        pki = self.base_dir / "pki"

        def argv() -> list[str]:
            if not fixed_port:
                self.apiserver_port = free_port()
            return [
                str(bin_dir / "kube-apiserver"),
                f"--etcd-servers={self.etcd_url}",
                "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
                f"--secure-port={self.apiserver_port}",
                f"--tls-cert-file={pki / 'serving.crt'}", f"--tls-private-key-file={pki / 'serving.key'}",
                f"--cert-dir={self.base_dir / 'apiserver-certs'}",
                "--authorization-mode=RBAC",
                f"--token-auth-file={pki / 'tokens.csv'}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={pki / 'sa.pub'}",
                f"--service-account-signing-key-file={pki / 'sa.key'}",
                "--service-cluster-ip-range=10.96.0.0/16",
                # The `kubernetes` Service's endpoints would be 127.0.0.1, which is refused.
                "--endpoint-reconciler-type=none",
                # No controller-manager: nothing creates `default` ServiceAccounts, and nothing
                # would lift the not-ready taint TaintNodesByCondition puts on every new node.
                "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
                "--profiling=false",
                # On SIGTERM the server otherwise waits its full 60 s shutdown timeout for open
                # watches (kwok's, the tests' informers) before it exits.
                "--shutdown-watch-termination-grace-period=1s",
            ]

        # A restart must keep its port (kubeconfigs and clients hold the URL), so a bind
        # failure then is retried on the same port: the old listener may linger a moment.
        self._start_with_retries("kube-apiserver", argv, self._apiserver_ready)

    def _ssl_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca_file))

    def _apiserver_ready(self) -> bool:
        request = urllib.request.Request(f"{self.url}/readyz",
                                         headers={"Authorization": f"Bearer {self.admin_token}"})
        try:
            with urllib.request.urlopen(request, timeout=2, context=self._ssl_context()) as reply:
                return bool(reply.status == 200 and reply.read().strip() == b"ok")
        except (OSError, ValueError):
            return False

    def _start_kwok(self) -> None:
        bin_dir = self.bin_dir
        assert bin_dir is not None

        def argv() -> list[str]:
            self.kwok_port = free_port()
            return [str(bin_dir / "kwok"), f"--kubeconfig={self.admin_kubeconfig}",
                    # Only our explicit config: no ~/.kwok/kwok.yaml from the machine.
                    f"--config={STAGES}",
                    "--manage-all-nodes=false",
                    f"--manage-nodes-with-annotation-selector={FAKE_NODE_ANNOTATION}=fake",
                    "--node-lease-duration-seconds=0",
                    # kwok's default pod CIDR is a /24, 254 pod IPs in all; nodes get 10.128/9.
                    f"--cidr={POD_CIDR}",
                    # The InternalIP of nodes made without one (nodes.add gives each its own);
                    # kwok has no default, and pods' hostIP comes from it.
                    f"--node-ip={FALLBACK_NODE_IP}",
                    f"--server-address=127.0.0.1:{self.kwok_port}"]

        self._start_with_retries("kwok", argv, self._kwok_ready)

    def _kwok_ready(self) -> bool:
        # kwok serves /healthz only after its controllers have started.
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.kwok_port}/healthz", timeout=2) as reply:
                return bool(reply.status == 200)
        except (OSError, ValueError):
            return False

    # -- clients -------------------------------------------------------------------------
    def _write_kubeconfig(self, path: Path, token: str) -> Path:
        config = {
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "test", "cluster": {"server": self.url,
                                                      "certificate-authority": str(self.ca_file)}}],
            "users": [{"name": "user", "user": {"token": token}}],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": "user"}}],
            "current-context": "test",
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        # JSON is YAML: every kubeconfig reader accepts it.
        path.write_text(json.dumps(config, indent=2))
        path.chmod(0o600)
        return path

    def kubeconfig_for_token(self, token: str, path: Path) -> Path:
        """Write a kubeconfig at `path` that talks to this API server with bearer `token`."""
        return self._write_kubeconfig(path, token)

    def api(self) -> Any:
        """A `kubernetes.client.ApiClient` on the admin kubeconfig (one, reused; closed by stop())."""
        if self._api is None:
            self._api = self.client_for(self.admin_kubeconfig)
        return self._api

    def client_for(self, kubeconfig: Path) -> Any:
        """A new `kubernetes.client.ApiClient` for any kubeconfig (the caller closes it)."""
        from kubernetes import client, config

        configuration = client.Configuration()
        config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
        # nodes.add uses many threads; urllib3's default pool of 4 would drop connections.
        configuration.connection_pool_maxsize = 32
        return client.ApiClient(configuration)

    def token_for_service_account(self, namespace: str, name: str, seconds: int = 3600) -> str:
        """A bearer token for ServiceAccount `namespace/name` from the TokenRequest API.

        The namespace and the ServiceAccount are created if missing (no controller does it
        here).  The API server refuses `seconds` under 600.
        """
        from kubernetes import client

        core = client.CoreV1Api(self.api())
        self._create_ignoring_conflict(lambda: core.create_namespace(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}))
        self._create_ignoring_conflict(lambda: core.create_namespaced_service_account(
            namespace, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}}))
        request = client.AuthenticationV1TokenRequest(
            spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=seconds))
        reply = core.create_namespaced_service_account_token(name, namespace, request)
        return str(reply.status.token)

    @staticmethod
    def _create_ignoring_conflict(create: Callable[[], object]) -> None:
        from kubernetes.client.exceptions import ApiException

        try:
            create()
        except ApiException as exc:
            if exc.status != 409:
                raise


@contextlib.contextmanager
def running_control_plane(base_dir: Path) -> Iterator[KubeControlPlane]:
    """A started control plane in `base_dir`, stopped by PID on exit."""
    plane = KubeControlPlane(base_dir).start()
    try:
        yield plane
    finally:
        plane.stop()
