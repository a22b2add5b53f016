"""Aurora bridge benchmark: getJobSummary and getTasksWithoutConfigs under 16 concurrent clients.

Run as `python -m tests.bench.bench_aurorabridge` (make bench does).  Shape:
the bridge runs as a real process (`peloton aurorabridge`) in front of a
FakePeloton served over gRPC from a second process, holding 1,000 jobs
(100 roles x 10 jobs) written by the bridge's own converters and one job of
5,000 tasks.  16 client threads each keep one HTTP connection and send
enveloped TBinaryProtocol calls (the Aurora CLI's form): getJobSummary for a
random role (10 jobs per reply), then getTasksWithoutConfigs for the big
job.  Numbers are "bridge over fake backend": they measure the bridge's own
cost plus one in-process fake, not a real job manager.  No pod changes
in the steady case, so after the first (cold) call, which `5k_single_ms`
reports, the bridge still asks the fake for all 5,000 pods per shared
computation but rebuilds nothing (aurorabridge/task_answers.py): the
loaded numbers are those of a job polled while steady.

The churn case (`5k_churn`) polls the same job while a driver in the fake's
process changes a different tenth of its pods every second: one in ten of
them gets a new run (new pod id and start time, the old run becomes an
earlier run the listing shows), the others a new state (STARTING, on the
next pass RUNNING again) and start time.  Measuring starts after 11 s of
churn during which the 16 clients already poll (unmeasured), so what is
measured is a job polled while it changes, not the catch-up of one left
unlisted while it changed.  A 17th client checks freshness: after each change it sends one
request, whose reply must list that change's new run and new state (the
bridge's coalescing promises state read after the request arrived); how long
after the change that reply came back is the lag.  Were every change a new
run (500 a second), each would cost one GetPod for its earlier runs: p99
about 5 s on this machine (one Peloton call per new run is the limit).
"""

from __future__ import annotations

import http.client
import multiprocessing
import queue
import random
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from tests.bench.common import load, percentile, report, scaled

CLIENTS = 16
ROLES = 100
JOBS_PER_ROLE = 10
BIG_TASKS = 5000
BINARY = "application/vnd.apache.thrift.binary"
NOTE = "bridge over fake backend"
CHURN_SHARE = 10  # every second, 1/CHURN_SHARE of the big job's pods change
RESTART_SHARE = 10  # and 1/RESTART_SHARE of those get a new run (the others a new state)
CHURN_WARM_S = scaled(11.0, smoke=2.0)  # every pod has changed once before measuring
CHURN_S = scaled(10.0, smoke=2.0)


def _churn(fake: Any, job_id: str, churning: Any, stop: Any, marks: Any) -> None:
    """Child thread: while `churning` is set, every second change the next tenth of the big
    job's pods (one in RESTART_SHARE of them gets a new run, the others a new state and start
    time) and put a Mark of the change on `marks`."""
    from peloton.api.gen.peloton.api.v1alpha.pod import pod_pb2

    per_tick = BIG_TASKS // CHURN_SHARE
    restarts = per_tick // RESTART_SHARE
    tick = 0
    while not stop.is_set():
        if not churning.wait(0.2):
            continue
        due = time.monotonic()
        while churning.is_set() and not stop.is_set():
            first = (tick * per_tick) % BIG_TASKS
            # The first pass moves every pod to STARTING, the next back to RUNNING, ...
            state = (pod_pb2.POD_STATE_STARTING if (tick // CHURN_SHARE) % 2 == 0
                     else pod_pb2.POD_STATE_RUNNING)
            ids = fake.relaunch_pods(job_id, list(range(first, first + restarts)))
            moved = list(range(first + restarts, first + per_tick))
            fake.move_pods(job_id, moved, state)
            # A plain tuple: this module is __main__ in one process and __mp_main__ in the other.
            marks.put((time.time(), ids[-1], moved[-1], pod_pb2.PodState.Name(state), per_tick))
            tick += 1
            due += 1.0
            time.sleep(max(0.0, due - time.monotonic()))


def _populate_and_serve(port_out: Any, stop: Any, churning: Any, marks: Any) -> None:
    """Child process: build the fake cluster with the bridge's converters and serve it (and
    churn the big job's pods while `churning` is set)."""
    from aurorabridge import validation
    from aurorabridge.atop.job_spec import job_spec
    from aurorabridge.atop.pod_spec import pod_spec
    from aurorabridge.config import ValidationSettings
    from tests.harness.fake_peloton import FakePeloton
    from tests.harness.fake_peloton_grpc import serve
    from tests.unit.aurorabridge import builders as b

    fake = FakePeloton()
    limits = ValidationSettings(max_tasks_per_job=BIG_TASKS)

    def add(role: str, name: str, count: int) -> None:
        checked = validation.check_task(b.task_config(role=role, name=name, ports=("http",)), count, limits)
        pod = pod_spec(checked.task, checked.key, checked.resources)
        fake.create_stateless_job(job_spec(checked.task, checked.key, count, "pool", pod))

    for r in range(ROLES):
        for j in range(JOBS_PER_ROLE):
            add(f"role{r}", f"job{j}", 1)
    add("big", "big", BIG_TASKS)
    fake.record = lambda method, **kwargs: None  # no call log in a bench
    server = serve(fake)
    big = fake.job_by_name("big/devel/big")
    threading.Thread(target=_churn, args=(fake, big.job_id, churning, stop, marks), daemon=True).start()
    port_out.put(server.port)
    stop.wait()
    server.stop(0)


def _encode(method: str, **args: Any) -> bytes:
    from thriftpy2.protocol.binary import TBinaryProtocol
    from thriftpy2.thrift import TMessageType
    from thriftpy2.transport import TMemoryBuffer

    from aurorabridge.thrift_api import args_class

    buf = TMemoryBuffer()
    proto = TBinaryProtocol(buf)
    proto.write_message_begin(method, TMessageType.CALL, 1)
    args_class(method)(**args).write(proto)
    proto.write_message_end()
    return bytes(buf.getvalue())


def _decode(method: str, body: bytes) -> Any:
    from thriftpy2.protocol.cybin import TCyBinaryProtocol
    from thriftpy2.transport.memory import TCyMemoryBuffer

    from aurorabridge.thrift_api import result_class

    proto = TCyBinaryProtocol(TCyMemoryBuffer(body))
    proto.read_message_begin()
    result = result_class(method)()
    result.read(proto)
    return result.success


def _load(port: int, bodies: Callable[[], bytes], seconds: float,
          clients: int) -> tuple[int, list[float], int]:
    """Requests done, latencies (s) and HTTP/Thrift failures of `clients` threads for `seconds`."""
    latencies: list[list[float]] = [[] for _ in range(clients)]
    failures = [0] * clients
    deadline = time.monotonic() + seconds

    def client(i: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        headers = {"Content-Type": BINARY, "Accept": BINARY}
        while time.monotonic() < deadline:
            body = bodies()
            t0 = time.perf_counter()
            conn.request("POST", "/api", body, headers)
            resp = conn.getresponse()
            data = resp.read()
            latencies[i].append(time.perf_counter() - t0)
            # ResponseCode OK is the i32 right after the Response struct's first field header.
            if resp.status != 200 or b"\x08\x00\x01\x00\x00\x00\x01" not in data[:80]:
                failures[i] += 1
        conn.close()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    flat = [x for xs in latencies for x in xs]
    return len(flat), flat, sum(failures)


class Mark(NamedTuple):
    """One second's change to the big job, as the churn driver reports it."""

    changed_at: float  # wall clock, just after the change
    new_run: str  # the pod id of one pod's new run
    moved: int  # the instance of one pod whose run changed state
    state: str  # that state (PodState name)
    pods: int  # pods changed


class Freshness:
    """The 17th client: after each pod change, one request that must list a changed pod's new
    run (see the module docstring); lags in seconds, stale replies, pods changed."""

    def __init__(self, port: int, body: bytes, marks: Any) -> None:
        self.lags: list[float] = []
        self.stale = 0
        self.changed = 0
        self._replies: list[tuple[Mark, bytes]] = []
        self._port, self._body, self._marks = port, body, marks
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Freshness:
        while True:  # changes made before the measured window are not its to count
            try:
                self._marks.get_nowait()
            except queue.Empty:
                break
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(60)
        self._check()

    def _take(self) -> list[Mark]:
        """The changes reported since the last call (waits up to 0.5 s for one)."""
        try:
            marks = [Mark(*self._marks.get(timeout=0.5))]
        except queue.Empty:
            return []
        while True:
            try:
                marks.append(Mark(*self._marks.get_nowait()))
            except queue.Empty:
                return marks

    def _run(self) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self._port, timeout=60)
        headers = {"Content-Type": BINARY, "Accept": BINARY}
        while not self._stop.is_set():
            marks = self._take()
            if not marks:
                continue
            self.changed += sum(m.pods for m in marks)
            mark = marks[-1]  # the newest change (more may have come while the last request ran)
            conn.request("POST", "/api", self._body, headers)  # sent after the change was made
            data = conn.getresponse().read()
            self.lags.append(time.time() - mark.changed_at)
            self._replies.append((mark, data))
        conn.close()

    def _check(self) -> None:
        """Count the replies that miss their change (decoded after the load: a 5,000-task decode
        holds this process's GIL long enough to delay the measured clients)."""
        from aurorabridge.thrift_api import api

        for mark, data in self._replies:
            tasks = _decode("getTasksWithoutConfigs", data).result.scheduleStatusResult.tasks
            ids = {t.assignedTask.taskId for t in tasks}
            # Tasks come by instance, newest run first: the first of an instance is its current run.
            moved = next((t for t in tasks if t.assignedTask.instanceId == mark.moved), None)
            expected = api.ScheduleStatus._NAMES_TO_VALUES[mark.state.removeprefix("POD_STATE_")]
            if mark.new_run not in ids or moved is None or moved.status != expected:
                self.stale += 1


def _churn_case(port: int, big: bytes, churning: Any, marks: Any, steady_p99_ms: float) -> None:
    """getTasksWithoutConfigs of the big job under 16 clients while its pods keep changing."""
    churning.set()
    try:
        # The clients poll through the warm-up too, unmeasured: a job nobody listed for 11 s
        # costs its next listing a catch-up on every change since (~550 earlier-run reads),
        # which the 17 requests waiting on it would otherwise turn into the p99 of a polled job.
        _load(port, lambda: big, CHURN_WARM_S, CLIENTS)
        with Freshness(port, big, marks) as fresh:
            t0 = time.monotonic()
            done_n, lat, failed = _load(port, lambda: big, CHURN_S, CLIENTS)
            took = time.monotonic() - t0
    finally:
        churning.clear()
    per_s = fresh.changed / took
    worst = max(fresh.lags, default=float("nan"))
    note = (f"{NOTE}; 16 binary clients; {per_s:.0f} pods changed per second ({100 // CHURN_SHARE} % "
            f"of 5,000; {100 // RESTART_SHARE} % of those a new run, the others a new state and "
            f"start time); freshness (new run and state listed): {len(fresh.lags)} requests sent "
            f"after a change, "
            f"{fresh.stale} stale, reply at most {worst * 1000:.0f} ms after the change; "
            f"{failed} failed; {load()}")
    report("aurorabridge.getTasksWithoutConfigs.5k_churn.req_per_s", done_n / CHURN_S, "req/s", "", note)
    limit = (f"; limit: every request still reads all 5,000 pods (steady p99 {steady_p99_ms:.0f} ms "
             "in this run), and a request that arrives while a changed reply is being rebuilt "
             "(earlier runs, conversions, a new 1.6 MB encoding) waits for it and the next read")
    report("aurorabridge.getTasksWithoutConfigs.5k_churn.p99_ms", percentile(lat, 99) * 1000, "ms",
           "<=200", note + limit)
    report("aurorabridge.getTasksWithoutConfigs.5k_churn.p50_ms", percentile(lat, 50) * 1000, "ms", "",
           NOTE)
    report("aurorabridge.getTasksWithoutConfigs.5k_churn.stale_replies", fresh.stale, "replies", "<=0",
           f"requests sent after a change whose reply lacked it, of {len(fresh.lags)}")


def main() -> None:
    from tests.harness.procs import PELOTON, OutputTail, free_port, stop

    ctx = multiprocessing.get_context("spawn")
    port_q, done, churning, marks = ctx.Queue(), ctx.Event(), ctx.Event(), ctx.Queue()
    backend = ctx.Process(target=_populate_and_serve, args=(port_q, done, churning, marks), daemon=True)
    t0 = time.monotonic()
    backend.start()
    grpc_port = port_q.get(timeout=120)
    address = f"127.0.0.1:{grpc_port}"
    port = free_port()
    bridge = subprocess.Popen([PELOTON, "aurorabridge", "--host", "127.0.0.1", "--port", str(port),
                               "--jobmgr", address, "--resmgr", address, "--hostmgr", address],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        OutputTail(bridge).wait_for("serving Aurora's API", 30)
        setup_s = time.monotonic() - t0
        roles = [_encode("getJobSummary", role=f"role{r}") for r in range(ROLES)]
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        conn.request("POST", "/api", roles[0], {"Content-Type": BINARY, "Accept": BINARY})
        summary = _decode("getJobSummary", conn.getresponse().read())
        assert len(summary.result.jobSummaryResult.summaries) == JOBS_PER_ROLE, summary
        _load(port, lambda: random.choice(roles), 2.0, CLIENTS)  # warm the bridge's config cache
        done_n, lat, failed = _load(port, lambda: random.choice(roles), 8.0, CLIENTS)
        report("aurorabridge.getJobSummary.req_per_s", done_n / 8.0, "req/s", ">=500",
               f"{NOTE}; 16 binary clients; 10 jobs per reply; 1,000 jobs; {failed} failed")
        report("aurorabridge.getJobSummary.p99_ms", percentile(lat, 99) * 1000, "ms", "<=200", NOTE)
        report("aurorabridge.getJobSummary.p50_ms", percentile(lat, 50) * 1000, "ms", "", NOTE)

        from aurorabridge.thrift_api import api

        big = _encode("getTasksWithoutConfigs", query=api.TaskQuery(role="big", environment="devel",
                                                                   jobName="big"))
        t1 = time.perf_counter()
        conn.request("POST", "/api", big, {"Content-Type": BINARY, "Accept": BINARY})
        body = conn.getresponse().read()
        single = time.perf_counter() - t1
        tasks = _decode("getTasksWithoutConfigs", body).result.scheduleStatusResult.tasks
        assert len(tasks) == BIG_TASKS, len(tasks)
        report("aurorabridge.getTasksWithoutConfigs.5k_single_ms", single * 1000, "ms", "",
               f"{NOTE}; one cold call (nothing cached), {len(body) / 1e6:.1f} MB reply")
        done_n, lat, failed = _load(port, lambda: big, 10.0, CLIENTS)
        report("aurorabridge.getTasksWithoutConfigs.5k.req_per_s", done_n / 10.0, "req/s", "",
               f"{NOTE}; 16 binary clients; 5,000 tasks per reply; {failed} failed")
        steady_p99_ms = percentile(lat, 99) * 1000
        report("aurorabridge.getTasksWithoutConfigs.5k.p99_ms", steady_p99_ms, "ms", "<=200",
               f"{NOTE}; steady job, cached replies; {load()}")
        _churn_case(port, big, churning, marks, steady_p99_ms)
        report("aurorabridge.setup_s", setup_s, "s", "", "1,000 jobs + a 5,000-task job built and served")
        conn.close()
    finally:
        stop(bridge)
        done.set()
        backend.join(10)


if __name__ == "__main__":
    main()
