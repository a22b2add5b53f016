"""The Kubernetes host backend (issue 21): our launch rate against the API server's own.

One real control plane (etcd, kube-apiserver, kwok; tests/harness/kube.py) with 5,000 kwok
nodes, measured twice on the same nodes:

(a) raw rate: a bare Python client (the `kubernetes` package, 8 threads, undecoded
    replies) creates 10,000 pods bound to the nodes (spec.nodeName), each exactly the pod
    our backend makes for the same one-shot task (k8s_wire.pod_manifest), annotated so kwok
    ends it 2 s after it runs; once all ran they are deleted (one call, grace 0).  A warm-up
    burst of 500 pods goes first, so neither run meets a cold API server;
(b) our rate: `peloton up --backend k8s:<admin kubeconfig>` (a subprocess) runs one batch
    job of 10,000 such instances (0.1 cpu each: they all fit at once).

Both runs are timed the same way: a watch of the run's pods in this process notes when
each pod is first seen (created) and first seen Running.  `k8s.*.launches_per_s` is pods
over the seconds from the first creation to the last, and `k8s.launch_ratio` ours over the
raw rate (target >= 0.9).  Submit -> Running per pod is from just before the CreateJob call
to the pod's Running; create -> Running (kwok and the API server's share) is also given.
Peak RSS of `peloton up` and of the kube-apiserver is sampled with psutil, and the CPU
seconds of every process (control plane, `peloton up`, this client) over each run say
what limits the rate.  Finished pods are kept (a TTL longer than the run), so neither run
deletes pods while it creates them; the job's end is not waited for.

Sizes: about 8 minutes on a quiet 2-core machine, so run.py lists it in LONG_MODULES.
`BENCH_SCALE=smoke`: 200 nodes, 500 pods, under a minute.  Without the control plane
binaries (no Go toolchain to build them) or when it cannot start, a `BENCH_SKIP` line says
why.  It runs without gevent: the raw client's threads are OS threads.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import psutil

from tests.bench.common import load, percentile, report, scaled

NODES = scaled(5_000, smoke=200)
PODS = scaled(10_000, smoke=500)
WARMUP = scaled(500, smoke=50)
THREADS = 8
#: Each pod of both runs: 0.1 cpu, 32 MiB, on 8-cpu nodes (all fit at once), ending after this.
TASK_CPU, TASK_MEM_MB, RUN_SECS = 0.1, 32, 2.0
RAW_NAMESPACE, RAW_CLUSTER = "bench-raw", "bench-raw"
EXIT_LABELS = (("pelotonpy.dev/fake-exit-code", "0"), ("pelotonpy.dev/fake-run-secs", str(RUN_SECS)))
#: How long each run may take before the module gives up on it.
RUN_TIMEOUT = scaled(600.0, smoke=60.0)


def wait_until(done: Callable[[], bool], timeout: float) -> bool:
    """Poll `done` every 0.1 s for up to `timeout` seconds; whether it came true."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if done():
            return True
        time.sleep(0.1)
    return False


# -- watching pods --------------------------------------------------------------------------
@dataclass
class Pod:
    """When this process first saw a pod, and first saw it Running (time.monotonic())."""

    seen: float
    running: float | None = None


class PodWatch:
    """A watch of one namespace's pods of one cluster label, in a thread; see the docstring."""

    def __init__(self, kube: Any, namespace: str, selector: str) -> None:
        from kubernetes import client

        self.namespace, self.selector = namespace, selector
        self.pods: dict[str, Pod] = {}
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._reply: Any = None
        self._api = kube.client_for(kube.admin_kubeconfig)
        self._core = client.CoreV1Api(self._api)
        self._version = ""

    def start(self) -> PodWatch:
        listed = self._call(self._core.list_namespaced_pod(self.namespace, label_selector=self.selector,
                                                           limit=1, _preload_content=False))
        self._version = listed["metadata"]["resourceVersion"]
        threading.Thread(target=self._run, name=f"watch-{self.namespace}", daemon=True).start()
        return self

    @staticmethod
    def _call(reply: Any) -> Any:
        """The JSON of an undecoded reply, read to its end before the connection is reused."""
        try:
            return orjson.loads(reply.data)
        finally:
            reply.release_conn()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._reply = self._core.list_namespaced_pod(
                    self.namespace, label_selector=self.selector, watch=True,
                    resource_version=self._version, timeout_seconds=3600, _preload_content=False)
                buffer = b""
                for chunk in self._reply.stream(1 << 16):
                    now = time.monotonic()
                    buffer += chunk
                    *lines, buffer = buffer.split(b"\n")
                    for line in lines:
                        if line.strip():
                            self._event(orjson.loads(line), now)
            except Exception as exc:
                if not self._stop.is_set():
                    self.errors.append(f"{type(exc).__name__}: {exc}")
                    time.sleep(0.5)

    def _event(self, event: dict[str, Any], now: float) -> None:
        obj = event.get("object") or {}
        if event.get("type") == "ERROR":
            raise RuntimeError(f"watch error: {obj.get('message')}")
        self._version = obj.get("metadata", {}).get("resourceVersion") or self._version
        if event.get("type") not in ("ADDED", "MODIFIED"):
            return
        name = obj["metadata"]["name"]
        pod = self.pods.get(name)
        if pod is None:
            pod = self.pods[name] = Pod(now)
        if pod.running is None and obj.get("status", {}).get("phase") in ("Running", "Succeeded"):
            pod.running = now

    def running(self) -> int:
        return sum(1 for p in list(self.pods.values()) if p.running is not None)

    def wait_seen(self, count: int, timeout: float) -> bool:
        return wait_until(lambda: len(self.pods) >= count, timeout)

    def wait_running(self, count: int, timeout: float) -> bool:
        return wait_until(lambda: self.running() >= count, timeout)

    def stop(self) -> None:
        self._stop.set()
        if self._reply is not None:
            with contextlib.suppress(Exception):
                self._reply.shutdown()
            with contextlib.suppress(Exception):
                self._reply.close()
        self._api.close()

    def launch_rate(self) -> tuple[float, float]:
        """(pods per second from the first creation seen to the last, those seconds)."""
        seen = sorted(p.seen for p in self.pods.values())
        if len(seen) < 2:
            return 0.0, 0.0
        span = seen[-1] - seen[0]
        return (len(seen) - 1) / span if span > 0 else 0.0, span

    def problems(self) -> str:
        """What went wrong with the watch, for a note ("" if nothing)."""
        return f", watch failed {len(self.errors)} times: {self.errors[0]}" if self.errors else ""

    def create_to_running(self) -> list[float]:
        return [p.running - p.seen for p in self.pods.values() if p.running is not None]


# -- measuring processes --------------------------------------------------------------------
class Sampler:
    """Peak RSS (MB) of named processes, sampled with psutil every 0.25 s in a thread, and
    their CPU seconds between `mark()` and `cpu()`."""

    def __init__(self) -> None:
        self.procs: dict[str, psutil.Process] = {}
        self.peak_mb: dict[str, float] = {}
        self._cpu0: dict[str, float] = {}
        self._marked = time.monotonic()
        self._stop = threading.Event()
        threading.Thread(target=self._run, name="rss-sampler", daemon=True).start()

    def add(self, name: str, pid: int) -> None:
        self.procs[name] = psutil.Process(pid)

    def _sample(self) -> None:
        for name, proc in list(self.procs.items()):
            with contextlib.suppress(psutil.Error):
                mb = proc.memory_info().rss / 2 ** 20
                self.peak_mb[name] = max(self.peak_mb.get(name, 0.0), mb)

    def _run(self) -> None:
        while not self._stop.wait(0.25):
            self._sample()

    @staticmethod
    def _cpu_of(proc: psutil.Process) -> float:
        try:
            times = proc.cpu_times()
            return float(times.user + times.system)
        except psutil.Error:
            return 0.0

    def mark(self) -> None:
        self._cpu0 = {name: self._cpu_of(proc) for name, proc in self.procs.items()}
        self._marked = time.monotonic()

    def elapsed(self) -> float:
        """Seconds since `mark()`."""
        return time.monotonic() - self._marked

    def cpu(self) -> dict[str, float]:
        return {name: self._cpu_of(proc) - self._cpu0.get(name, 0.0)
                for name, proc in self.procs.items()}

    def stop(self) -> None:
        self._sample()
        self._stop.set()


def cpu_note(cpu: dict[str, float], seconds: float) -> str:
    return ", ".join(f"{name} {used:.0f} s ({used / seconds:.2f} cores)"
                     for name, used in sorted(cpu.items(), key=lambda kv: -kv[1]))


# -- (a) the raw rate -------------------------------------------------------------------------
def raw_manifests(nodes: list[str], count: int, job: str) -> list[dict[str, Any]]:
    """The pods our backend would create for `count` one-shot tasks of job id `job`, spread
    over `nodes`."""
    from peloton.core.model.constraints import Label
    from peloton.core.model.resources import Resources
    from peloton.core.model.sched import LaunchSpec
    from peloton.core.model.task import CommandSpec, TaskSpec
    from peloton.hostmgr.backends.k8s_config import KubeConfig
    from peloton.hostmgr.backends.k8s_wire import NodeFacts, pod_manifest

    config = KubeConfig(namespace=RAW_NAMESPACE, cluster_name=RAW_CLUSTER)
    spec = TaskSpec(resources=Resources(cpu=TASK_CPU, mem_mb=TASK_MEM_MB, disk_mb=1),
                    command=CommandSpec("true"), labels=tuple(Label(k, v) for k, v in EXIT_LABELS))
    out = []
    for i in range(count):
        node = NodeFacts(name=nodes[i % len(nodes)], uid="", ready=True, schedulable=True,
                         allocatable=Resources(), gpu_resource="", labels=(), taints=(), address="")
        out.append(pod_manifest(LaunchSpec(f"{job}-{i}-1", spec), node, RAW_NAMESPACE, config))
    return out


class RawClient:
    """The bare client: the `kubernetes` package's CoreV1Api, replies left undecoded."""

    def __init__(self, kube: Any) -> None:
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        self._api = kube.client_for(kube.admin_kubeconfig)
        self.core = client.CoreV1Api(self._api)
        self.failures: list[str] = []
        with contextlib.suppress(ApiException):
            self.core.create_namespace({"apiVersion": "v1", "kind": "Namespace",
                                        "metadata": {"name": RAW_NAMESPACE}})

    def create(self, body: dict[str, Any]) -> None:
        from kubernetes.client.exceptions import ApiException

        for _ in range(5):
            try:
                # The reply read to its end before its connection goes back to the pool.
                PodWatch._call(self.core.create_namespaced_pod(RAW_NAMESPACE, body,
                                                               _preload_content=False))
                return
            except ApiException as exc:
                if exc.status not in (429, 500, 503, 504):
                    self.failures.append(f"{exc.status} {exc.reason}")
                    return
                time.sleep(0.2)
        self.failures.append("gave up after 5 attempts")

    def create_all(self, bodies: list[dict[str, Any]]) -> float:
        """Create every pod on THREADS threads; the seconds it took."""
        t0 = time.perf_counter()
        with ThreadPoolExecutor(max_workers=THREADS) as pool:
            list(pool.map(self.create, bodies))
        return time.perf_counter() - t0

    def delete_all(self) -> None:
        """Delete the namespace's pods (grace 0, one call for all) and wait until none is left.

        On a busy machine the call can outlast the API server's 60 s request timeout (504)
        with part of the pods deleted: it is made again until none is left."""
        from kubernetes.client.exceptions import ApiException

        def left() -> bool:
            return bool(PodWatch._call(self.core.list_namespaced_pod(
                RAW_NAMESPACE, limit=1, _preload_content=False))["items"])

        deadline = time.monotonic() + RUN_TIMEOUT
        while left() and time.monotonic() < deadline:
            try:
                PodWatch._call(self.core.delete_collection_namespaced_pod(
                    RAW_NAMESPACE, grace_period_seconds=0, _preload_content=False))
            except ApiException as exc:
                if exc.status not in (429, 500, 503, 504):
                    raise

    def close(self) -> None:
        self._api.close()


def bench_raw(kube: Any, nodes: list[str], sampler: Sampler) -> float:
    """Create PODS pods with a bare client; report and return the rate (pods/s)."""
    raw = RawClient(kube)
    selector = f"pelotonpy.dev/cluster={RAW_CLUSTER}"
    try:
        # A warm-up burst first, so neither run is the API server's first pods.
        warm = PodWatch(kube, RAW_NAMESPACE, selector).start()
        raw.create_all(raw_manifests(nodes, WARMUP, "00000000-0000-4000-8000-0000000000aa"))
        warm.wait_running(WARMUP - len(raw.failures), RUN_TIMEOUT)
        warm.stop()
        raw.delete_all()
        raw.failures.clear()

        bodies = raw_manifests(nodes, PODS, "00000000-0000-4000-8000-00000000beef")
        watch = PodWatch(kube, RAW_NAMESPACE, selector).start()
        sampler.mark()
        calls = raw.create_all(bodies)
        cpu_create = sampler.cpu()
        all_running = watch.wait_running(PODS - len(raw.failures), RUN_TIMEOUT)
        cpu_all, window = sampler.cpu(), sampler.elapsed()
        watch.stop()
        rate, span = watch.launch_rate()
        latencies = watch.create_to_running()
        failures = raw.failures
        report("k8s.raw.pods_per_s", rate, "pods/s",
               note=f"{len(watch.pods):,} pods bound to {len(nodes):,} kwok nodes by a bare "
                    f"`kubernetes` client, {THREADS} threads, undecoded replies: first to last "
                    f"creation seen by a watch in {span:.1f} s ({PODS / calls:.0f}/s by the client's "
                    f"clock; {len(failures)} refused{', ' + failures[0] if failures else ''}"
                    f"{'' if all_running else ', NOT all seen Running'}{watch.problems()}); "
                    f"{load()}")
        report("k8s.raw.create_to_running_p50_ms", percentile(latencies, 50) * 1000, "ms",
               note=f"pod first seen -> first seen Running (kwok's stage and the API server); "
                    f"p99 {percentile(latencies, 99) * 1000:.0f} ms")
        report("k8s.raw.cpu_s", sum(cpu_create.values()), "s",
               note=f"CPU while the client created the pods ({calls:.0f} s): "
                    f"{cpu_note(cpu_create, calls)}; until all were Running ({window:.0f} s): "
                    f"{cpu_note(cpu_all, window)}")
        # Gone at once, so (b) starts on empty nodes.
        raw.delete_all()
    finally:
        raw.close()
    return rate


# -- (b) our rate ------------------------------------------------------------------------------
def job_config(pool: str) -> Any:
    from peloton.api.gen.peloton.api.v0.job import job_pb2

    cfg = job_pb2.JobConfig(name=f"bench-k8s-{PODS}", instanceCount=PODS, owningTeam="bench")
    cfg.respoolID.value = pool
    cfg.sla.preemptible = True
    res = cfg.defaultConfig.resource
    res.cpuLimit, res.memLimitMb, res.diskLimitMb = TASK_CPU, TASK_MEM_MB, 1
    cfg.defaultConfig.command.shell = True
    cfg.defaultConfig.command.value = "true"
    for key, value in EXIT_LABELS:
        cfg.defaultConfig.labels.add(key=key, value=value)
    return cfg


def make_pool(client: Any) -> str:
    from peloton.api.gen.peloton.api.v0.respool import respool_pb2

    cfg = respool_pb2.ResourcePoolConfig(name="bench-k8s")
    cfg.parent.value = "root"
    cpu = NODES * 8.0
    for kind, amount in (("cpu", cpu), ("memory", cpu * 4096), ("disk", cpu * 100000), ("gpu", 0)):
        cfg.resources.add(kind=kind, reservation=0, limit=amount, share=1)
    return str(client.create_respool(cfg).result.value)


def bench_ours(kube: Any, cluster: Any, sampler: Sampler, raw_rate: float) -> None:
    """Run the batch job through `peloton up`; report rate, ratio, latencies, RSS."""
    up = cluster.up
    t_start = time.monotonic()
    cluster.start()
    assert up.proc is not None
    sampler.add("peloton up", up.proc.pid)
    client = up.client
    deadline = time.monotonic() + RUN_TIMEOUT
    hosts = 0
    while time.monotonic() < deadline:
        hosts = len(client.list_host_capacity().hosts)
        if hosts >= NODES:
            break
        time.sleep(0.5)
    started = time.monotonic() - t_start
    pool = make_pool(client)
    watch = PodWatch(kube, "pelotonpy", f"pelotonpy.dev/cluster={cluster.name}").start()
    sampler.mark()
    submit = time.monotonic()
    job_id = client.create_job(job_config(pool)).jobId.value
    answered = time.monotonic() - submit
    watch.wait_seen(PODS, RUN_TIMEOUT)
    cpu_create, created = sampler.cpu(), sampler.elapsed()
    all_running = watch.wait_running(PODS, RUN_TIMEOUT)
    cpu_all, window = sampler.cpu(), sampler.elapsed()
    stats = dict(client.get_job(job_id).jobInfo.runtime.taskStats)
    watch.stop()
    rate, span = watch.launch_rate()
    to_running = [p.running - submit for p in watch.pods.values() if p.running is not None]
    latencies = watch.create_to_running()
    first = min((p.seen for p in watch.pods.values()), default=submit) - submit
    tasks = ", ".join(f"{n:,} {s}" for s, n in sorted(stats.items()) if n)
    report("k8s.ours.launches_per_s", rate, "pods/s",
           note=f"one batch job of {PODS:,} instances ({TASK_CPU} cpu, {TASK_MEM_MB} MiB, kwok ends each "
                f"{RUN_SECS:g} s after Running) through `peloton up --backend k8s:` on the same "
                f"{NODES:,} nodes: {len(watch.pods):,} pods, first to last creation seen by a watch in "
                f"{span:.1f} s; first pod {first:.2f} s after CreateJob (answered in {answered:.2f} s); "
                f"the job's tasks then: {tasks}"
                f"{'' if all_running else ', NOT all seen Running'}{watch.problems()}; {load()}")
    report("k8s.launch_ratio", rate / raw_rate if raw_rate else 0.0, "x", target=">=0.9",
           note="k8s.ours.launches_per_s over k8s.raw.pods_per_s, same control plane and nodes")
    report("k8s.ours.submit_to_running_p50_s", percentile(to_running, 50), "s",
           note=f"CreateJob call -> each pod first seen Running, {len(to_running):,} pods (a burst: "
                f"mostly the wait for the pods created before it)")
    report("k8s.ours.submit_to_running_p99_s", percentile(to_running, 99), "s",
           note=f"same; first pod Running {min(to_running, default=0):.2f} s after submit")
    report("k8s.ours.create_to_running_p50_ms", percentile(latencies, 50) * 1000, "ms",
           note=f"pod first seen -> first seen Running (kwok and the API server); p99 "
                f"{percentile(latencies, 99) * 1000:.0f} ms")
    report("k8s.ours.cpu_s", sum(cpu_create.values()), "s",
           note=f"CPU from CreateJob until the last pod was created ({created:.0f} s): "
                f"{cpu_note(cpu_create, created)}; until all were Running ({window:.0f} s): "
                f"{cpu_note(cpu_all, window)}")
    sampler.stop()
    report("k8s.ours.peloton_up_rss_mb", sampler.peak_mb.get("peloton up", 0.0), "MB",
           note=f"peak RSS of the `peloton up` process (psutil, every 0.25 s); it listed "
                f"{hosts:,} nodes as hosts {started:.0f} s after it was started")
    report("k8s.apiserver_rss_mb", sampler.peak_mb.get("kube-apiserver", 0.0), "MB",
           note=f"peak RSS of kube-apiserver over both runs ({NODES:,} nodes, {2 * PODS:,} pods "
                f"created); etcd {sampler.peak_mb.get('etcd', 0.0):.0f} MB, kwok "
                f"{sampler.peak_mb.get('kwok', 0.0):.0f} MB")


# -- the whole run -----------------------------------------------------------------------------
def main() -> None:
    from kubernetes import client

    from tests.harness.kube import KubeControlPlane
    from tests.harness.kube_cluster import KubeCluster

    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        try:
            kube = KubeControlPlane(Path(tmp) / "kube").start()
        except (RuntimeError, OSError) as exc:  # no binaries and no Go to build them, or a
            reason = " ".join(str(exc).split())[:300]  # process that would not start (StartError)
            print(f"BENCH_SKIP k8s the Kubernetes control plane could not be started: {reason}",
                  flush=True)
            return
        cluster = None
        sampler = Sampler()
        try:
            for name, pid in kube.pids.items():
                sampler.add(name, pid)
            sampler.add("this client", os.getpid())
            client.CoreV1Api(kube.api()).create_namespace(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "pelotonpy"}})
            t0 = time.monotonic()
            # Finished pods stay (a TTL longer than the run): neither run deletes pods meanwhile.
            cluster = KubeCluster(kube, kube.admin_kubeconfig, Path(tmp), nodes=NODES, cpu="8",
                                  memory="32Gi", settings={"finished_pod_ttl_secs": 3600.0,
                                                           "resend_secs": 10.0})
            print(f"# {NODES:,} kwok nodes Ready in {time.monotonic() - t0:.0f} s", flush=True)
            raw = bench_raw(kube, cluster.nodes, sampler)
            bench_ours(kube, cluster, sampler, raw)
        finally:
            sampler.stop()
            if cluster is not None:
                cluster.up.close()
            kube.stop()  # its pods and nodes go with it


if __name__ == "__main__":
    main()
