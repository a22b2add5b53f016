"""A job-manager member leaving while the cluster is busy (issue 24, item 2: no failover
pauses the cluster).

bench_member_failover measures how soon writes to a leaving member's partitions resume at a
low task rate.  This one asks what the rest of the cluster feels when a member leaves under
load: `peloton up --jobmgrs 2` (processes, simulated hosts in the host manager, one SQLite
store, as bench_scale_members runs it) runs bench_scale's shape (10 jobs of 10,000 one-second
half-cpu tasks by default), every job created and polled through `jobmgr-1`, which forwards
the creates of `jobmgr-2`'s partitions to it.  `LEAVE_AFTER_S` seconds after the first create
`jobmgr-2` is stopped, on a fresh cluster each: SIGTERM (the graceful leave) and SIGKILL; a
third cluster runs the shape with no one leaving, as the baseline.

- `leave_under_load.baseline.total_s`: seconds from the first create to the last job's end;
- `leave_under_load.<sigterm|kill9>.extra_s` (<= 1 and <= 5, item 2's pauses): how much
  longer the same shape took with the member leaving;
- the notes say whether the host manager's status stream filled (its log's "status stream
  full") and when it stopped waiting for the leaver's consumer ("no longer waiting").

What it found when it was written (2026-12-07): the leaver's stream consumer keeps holding
the stream's trimming back until the host manager forgets it as idle (`member_idle_timeout`,
60 s): at this shape's event rate the 100,000-event buffer fills a few seconds after the
leave and the host manager refuses every status update (back-pressure) until then, for every
partition, after a SIGTERM as after a kill -9 (docs/design/all-active-jobmgr.md).

Without ZooKeeper and Java it prints BENCH_SKIP.  Every process it starts is stopped by PID.
"""

from __future__ import annotations

from peloton.common.geventsetup import setup

setup()

import signal  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import gevent  # noqa: E402

from peloton.api.client import PelotonClient  # noqa: E402
from peloton.cluster.processes import ProcessCluster, ProcessesConfig  # noqa: E402
from tests.bench.bench_cluster import make_pool  # noqa: E402
from tests.bench.bench_scale import BACKEND, HOSTS, SHAPE, run_shape  # noqa: E402
from tests.bench.bench_scale_members import ZK_ROOT, wait_settled  # noqa: E402
from tests.bench.common import load, report, scaled, skipped_without_zookeeper  # noqa: E402

#: Seconds after the first create the member is stopped (the shape is under way by then).
LEAVE_AFTER_S = scaled(8.0, smoke=1.0)
#: What each scenario sends `jobmgr-2` (None: nobody leaves).
SCENARIOS: dict[str, signal.Signals | None] = {
    "baseline": None, "sigterm": signal.SIGTERM, "kill9": signal.SIGKILL}
TARGETS = {"sigterm": "<=1", "kill9": "<=5"}
#: Host manager log lines that tell the stream's story.
STREAM_LINES = ("status stream full", "no longer waiting for it")


def run(base: Path, sig: signal.Signals | None) -> tuple[float, str]:
    """One cluster: the shape, with `jobmgr-2` sent `sig` LEAVE_AFTER_S in; the shape's
    seconds and what the host manager's log said about its stream."""
    cluster = ProcessCluster(ProcessesConfig(
        jobmgrs=2, data_dir=base, agents=0, backend=BACKEND, jobmgr_port=0, resmgr_port=0,
        hostmgr_port=0, zk_root=ZK_ROOT))
    client = None
    try:
        cluster.start()
        wait_settled(cluster.zk, 2)
        where = cluster.addresses
        client = PelotonClient(jobmgr=where["jobmgr-1"], resmgr=where["resmgr"],
                               hostmgr=where["hostmgr"], timeout=120)
        pool = make_pool(client, HOSTS)
        signalled: list[str] = []

        def leave() -> None:
            gevent.sleep(LEAVE_AFTER_S)
            victim = next(p for p in cluster.procs if p.name == "jobmgr-2")
            assert sig is not None
            victim.proc.send_signal(sig)
            signalled.append(time.strftime("%H:%M:%S"))

        leaver = gevent.spawn(leave) if sig is not None else None
        shape = run_shape([client], pool)
        if leaver is not None:
            leaver.kill()
        hostmgr = next(p for p in cluster.procs if p.name == "hostmgr")
        said = [f"{line[11:19]} {what}" for line in hostmgr.log.read_text(
            errors="replace").splitlines() for what in STREAM_LINES if what in line]
        story = (f"signalled {signalled[0] if signalled else 'never'}; host manager: "
                 f"{'; '.join(said) or 'stream never full'}; {shape.ended()}")
        return shape.total_s, story
    finally:
        if client is not None:
            client.close()
        cluster.stop()


def main() -> None:
    if skipped_without_zookeeper("leave_under_load"):
        return
    totals: dict[str, float] = {}
    for name, sig in SCENARIOS.items():
        with tempfile.TemporaryDirectory() as tmp:
            totals[name], story = run(Path(tmp), sig)
        if sig is None:
            report("leave_under_load.baseline.total_s", totals[name], "s",
                   note=f"{SHAPE} through `peloton up --jobmgrs 2`, every job through "
                        f"jobmgr-1, nobody leaving ({story}); {load()}")
        else:
            report(f"leave_under_load.{name}.extra_s", totals[name] - totals["baseline"], "s",
                   TARGETS[name],
                   f"the same shape took {totals[name]:.1f} s against {totals['baseline']:.1f} "
                   f"with jobmgr-2 sent {sig.name} {LEAVE_AFTER_S:g} s after the first create "
                   f"({story}); {load()}")


if __name__ == "__main__":
    main()
