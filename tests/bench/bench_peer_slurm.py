"""A peer in the same run: the same trivial workload through Slurm and through us.

Slurm is Debian's `slurm-wlm` (22.05 on Debian 12): one node on 127.0.0.1 with free ports,
started and stopped by this benchmark (tests/bench/slurm/). It runs with the fastest
settings we found for many short jobs (`tuned`: no batch delay, scheduler on every event,
an Epilog so the controller hears of every job end at once). Our side is `peloton up` in
this process with one `peloton agent` process, as in bench_cluster.

Workloads, each measured on both:
- loop: 1,000 jobs of one `/bin/true` each, submitted one after another (`sbatch` in a
  shell loop; CreateJob calls from one client), from the first submit to the last job done;
- array: one submission of 1,000 `/bin/true` tasks (`sbatch --array`; one job of 1,000
  instances);
- latency: an idle cluster, one job at a time whose command records when it started:
  submit -> the task's process running, median of LATENCY_SAMPLES.

Each figure is printed for both and as a ratio (ours / Slurm for rates, Slurm / ours for
latency, so above 1 means we are faster). When Slurm cannot be installed or started, one
`BENCH_SKIP` line says why; our figures are still measured.
"""

from __future__ import annotations

from peloton.common.geventsetup import setup

setup()

import os  # noqa: E402
import random  # noqa: E402
import shutil  # noqa: E402
import socket  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from datetime import datetime  # noqa: E402
from pathlib import Path  # noqa: E402

from peloton.api.client import PelotonClient  # noqa: E402
from peloton.api.gen.peloton.api.v0.job import job_pb2  # noqa: E402
from tests.bench.bench_cluster import job_config, make_pool, start, wait_state  # noqa: E402
from tests.bench.common import report  # noqa: E402

HERE = Path(__file__).resolve().parent / "slurm"
JOBS = int(os.environ.get("BENCH_PEER_JOBS", "1000"))
LATENCY_SAMPLES = int(os.environ.get("BENCH_PEER_LATENCY_SAMPLES", "10"))
#: Idle time between latency samples: random, so a scheduler tick is met at any phase.
GAP_S = (1.0, 2.0)
DEADLINE_S = 300.0
DONE = {"SUCCEEDED", "FAILED", "KILLED"}


def skip(reason: str) -> None:
    """Say loudly that the peer was not measured (tests/bench/run.py records it)."""
    print(f"BENCH_SKIP peer.slurm {reason}", flush=True)


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def slurm_missing() -> str:
    """Why Slurm cannot run here ('' if it can), installing it once if apt allows."""
    needed = ("slurmctld", "slurmd", "sbatch", "munged")
    if all(shutil.which(c) for c in needed):
        return ""
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return "slurm-wlm is not installed and cannot be installed here (needs root and apt)"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    cmd = ["apt-get", "install", "-y", "-q", "--no-install-recommends", "slurm-wlm", "munge"]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        subprocess.run(["apt-get", "update", "-q"], capture_output=True, env=env, check=False)
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0 or not all(shutil.which(c) for c in needed):
        return f"installing slurm-wlm failed: {done.stderr.strip()[-200:]}"
    return ""


class Slurm:
    """One node started by tests/bench/slurm/start.sh, stopped by PID."""

    def __init__(self, profile: str) -> None:
        # Under /tmp itself: the munge user must be able to reach the socket directory.
        self.base = Path(tempfile.gettempdir()) / f"peloton-bench-slurm-{os.getpid()}"
        self.profile = profile
        self.env = {**os.environ, "SLURM_CONF": str(self.base / "slurm.conf")}

    def __enter__(self) -> Slurm:
        done = subprocess.run([str(HERE / "start.sh"), str(self.base), self.profile,
                               str(free_port()), str(free_port())],
                              capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0 or "ready" not in done.stdout:
            self.stop()
            raise RuntimeError(f"slurm did not start: {done.stderr.strip()[-300:]}")
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop the daemons and remove the node's directory."""
        subprocess.run([str(HERE / "stop.sh"), str(self.base)], capture_output=True,
                       timeout=60, check=False)
        shutil.rmtree(self.base, ignore_errors=True)

    def sh(self, script: str) -> str:
        """Run a shell snippet against this node."""
        return subprocess.run(["bash", "-c", script], capture_output=True, text=True,
                              env=self.env, check=True, timeout=DEADLINE_S).stdout

    def completed(self) -> int:
        """Jobs (array tasks count one each) in the job-completion log."""
        try:
            with open(self.base / "jobcomp.txt", "rb") as f:
                return sum(1 for _ in f)
        except FileNotFoundError:
            return 0

    def wait_completed(self, count: int) -> float:
        """Block until `count` jobs completed; returns when (perf_counter)."""
        deadline = time.monotonic() + DEADLINE_S
        while self.completed() < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"slurm completed {self.completed()} of {count} jobs")
            time.sleep(0.01)
        return time.perf_counter()

    def run_jobs(self, mode: str, n: int) -> float:
        """Jobs per second for `n` /bin/true jobs submitted in `mode` (loop or array)."""
        before = self.completed()
        flags = "-n1 --mem=10M -o /dev/null --wrap=/bin/true"
        script = (f"for i in $(seq {n}); do sbatch {flags} >/dev/null || exit 1; done"
                  if mode == "loop" else f"sbatch --array=0-{n - 1} {flags} >/dev/null")
        t0 = time.perf_counter()
        self.sh(script)
        return n / (self.wait_completed(before + n) - t0)

    def latency(self, samples: int) -> list[float]:
        """Seconds from submit to the job's process running, one job at a time, idle."""
        out = self.base / "out"
        script = out / "started.sh"
        script.write_text(f"#!/bin/sh\ndate +%s.%N > {out}/t.$SLURM_JOB_ID.tmp && "
                          f"mv {out}/t.$SLURM_JOB_ID.tmp {out}/t.$SLURM_JOB_ID\n")
        script.chmod(0o755)
        found = []
        for _ in range(samples):
            time.sleep(random.uniform(*GAP_S))
            t0 = time.time()
            jid = self.sh(f"sbatch --parsable -n1 --mem=10M -o /dev/null {script}").strip()
            mark = out / f"t.{jid}"
            deadline = time.monotonic() + 60
            while not mark.exists():
                if time.monotonic() > deadline:
                    raise TimeoutError(f"slurm job {jid} did not start within 60 s")
                time.sleep(0.002)
            found.append(float(mark.read_text()) - t0)
        return found


def ours_loop(client: PelotonClient, pool: str, n: int) -> float:
    """`n` one-task jobs created one after another; jobs per second to the last one done."""
    t0 = time.perf_counter()
    wall0 = time.time()
    ids = [client.create_job(job_config(pool, 1, 0.002, "/bin/true", mem=0, argv=("true",)))
           .jobId.value for _ in range(n)]
    deadline = time.monotonic() + DEADLINE_S
    left = list(ids)
    last_done = wall0
    while left and time.monotonic() < deadline:
        still = []
        for job_id in left:
            runtime = client.get_job(job_id).jobInfo.runtime
            if job_pb2.JobState.Name(runtime.state) in DONE:
                last_done = max(last_done, _seconds(runtime.completionTime) or time.time())
            else:
                still.append(job_id)
        left = still
        if left:
            time.sleep(0.1)
    if left:
        raise TimeoutError(f"{len(left)} of {n} jobs not done")
    # Completion times are stamped by the job manager: the polling pace does not count.
    return n / max(last_done - wall0, time.perf_counter() - t0 - 0.2, 1e-6)


def _seconds(stamp: str) -> float:
    if not stamp:
        return 0.0
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def ours_array(client: PelotonClient, pool: str, n: int) -> float:
    """One job of `n` /bin/true tasks; tasks per second to the job's end."""
    t0 = time.perf_counter()
    job_id = client.create_job(job_config(pool, n, 0.002, "/bin/true", mem=0,
                                          argv=("true",))).jobId.value
    state = wait_state(client, job_id, DONE, DEADLINE_S)
    if state != "SUCCEEDED":
        raise RuntimeError(f"array job ended {state}")
    return n / (time.perf_counter() - t0)


def ours_latency(client: PelotonClient, pool: str, samples: int, marks: Path) -> list[float]:
    """Seconds from CreateJob to the task's process running, one job at a time, idle."""
    found = []
    for i in range(samples):
        time.sleep(random.uniform(*GAP_S))
        mark = marks / f"t.{i}"
        t0 = time.time()
        job_id = client.create_job(job_config(
            pool, 1, 0.01, f"date +%s.%N > {mark}.tmp && mv {mark}.tmp {mark}")).jobId.value
        deadline = time.monotonic() + 60
        while not mark.exists():
            if time.monotonic() > deadline:
                raise TimeoutError(f"job {job_id} did not start within 60 s")
            time.sleep(0.002)
        found.append(float(mark.read_text()) - t0)
    return found


def measure_ours(base: Path) -> dict[str, float]:
    """Our three figures, on `peloton up` in this process plus one agent process."""
    cluster, client = start(base / "ours", "local", agents=0)
    agent = subprocess.Popen([str(Path(sys.executable).with_name("peloton")), "agent",
                              "--name", "peer-agent", "--hostmgr",
                              f"127.0.0.1:{cluster.ports['hostmgr']}", "--work-dir",
                              str(base / "ours" / "agent"), "--cpus", "2", "--mem-mb", "8192",
                              "--disk-mb", "100000"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # World-writable and sticky, like /tmp: tasks may run as an unprivileged user.
    marks = Path(tempfile.mkdtemp(prefix="peloton-bench-marks-", dir="/tmp"))
    marks.chmod(0o1777)
    try:
        deadline = time.monotonic() + 60
        while not cluster.hostmgr.host_summaries():
            if time.monotonic() > deadline:
                raise TimeoutError("the agent did not register")
            time.sleep(0.1)
        pool = make_pool(client, 2)
        return {"loop": ours_loop(client, pool, JOBS), "array": ours_array(client, pool, JOBS),
                "latency": statistics.median(ours_latency(client, pool, LATENCY_SAMPLES, marks))}
    finally:
        shutil.rmtree(marks, ignore_errors=True)
        agent.terminate()
        agent.wait(30)
        client.close()
        cluster.stop()


def measure_slurm() -> dict[str, float] | None:
    """Slurm's three figures, or None (after a BENCH_SKIP line) when it cannot run."""
    missing = slurm_missing()
    if missing:
        skip(missing)
        return None
    try:
        with Slurm("tuned") as slurm:
            out = {"loop": slurm.run_jobs("loop", JOBS), "array": slurm.run_jobs("array", JOBS)}
        # A fresh node for latency: an idle controller, as a user's first submit meets it.
        with Slurm("tuned") as slurm:
            out["latency"] = statistics.median(slurm.latency(LATENCY_SAMPLES))
        return out
    except (RuntimeError, TimeoutError, subprocess.SubprocessError) as exc:
        skip(f"slurm failed: {exc}")
        return None


def main() -> None:
    slurm = measure_slurm()
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        ours = measure_ours(Path(tmp))
    setup = "one node, 2 cores, one /bin/true per job"
    report("peer.ours.loop_jobs_per_s", ours["loop"], "jobs/s",
           note=f"{JOBS} one-task jobs created one after another, to the last one done ({setup})")
    report("peer.ours.array_tasks_per_s", ours["array"], "tasks/s",
           note=f"one job of {JOBS} tasks, to the job's end")
    report("peer.ours.submit_to_start.median_ms", ours["latency"] * 1000, "ms",
           note=f"CreateJob -> the task's process running, idle cluster, {LATENCY_SAMPLES} samples")
    if slurm is None:
        return
    report("peer.slurm.loop_jobs_per_s", slurm["loop"], "jobs/s",
           note=f"Slurm {slurm_version()} (tuned): {JOBS} x sbatch --wrap=/bin/true in a loop")
    report("peer.slurm.array_tasks_per_s", slurm["array"], "tasks/s",
           note=f"sbatch --array=0-{JOBS - 1}")
    report("peer.slurm.submit_to_start.median_ms", slurm["latency"] * 1000, "ms",
           note="sbatch -> the job's process running, idle node")
    report("peer.ratio.loop", ours["loop"] / slurm["loop"], "x", note="ours / Slurm (above 1: faster)")
    report("peer.ratio.array", ours["array"] / slurm["array"], "x", note="ours / Slurm")
    report("peer.ratio.submit_to_start", slurm["latency"] / ours["latency"], "x",
           note="Slurm's latency / ours (above 1: we start sooner)")


def slurm_version() -> str:
    """`sbatch --version`'s number."""
    # Without a config sbatch refuses even --version; the package's version needs none.
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "slurm-wlm"],
                             capture_output=True, text=True, check=True)
        return out.stdout.strip().split("-")[0] or "?"
    except (OSError, subprocess.CalledProcessError):
        return "?"


if __name__ == "__main__":
    main()
