"""The writers of the member failover benchmark (bench_member_failover.py): probes are
CreateJob calls of one-task batch jobs whose ids are drawn so that each lands in a chosen
job partition, made back to back (`Prober`) or once a partition's new holder is known
(`write_when_held`); `Creators` tells from the members' logs which member made a job."""

from __future__ import annotations

import itertools
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from kazoo.client import KazooClient
from kazoo.recipe.watchers import DataWatch

from peloton.api.client import PelotonClient
from peloton.common.leader import JOB_MANAGER
from peloton.common.membership import PARTITIONS, role_path
from peloton.core.errors import PelotonError
from peloton.core.partitions import DEFAULT_PARTITIONS, partition_of
from tests.bench.bench_cluster import job_config
from tests.bench.common import until

PROBE_CPU = 0.05
#: The probes' client deadline (seconds), and the pause after an acknowledged probe and
#: after a failed one: the resolution of the figures.
PROBE_TIMEOUT_S = 2.0
PROBE_INTERVAL_S = 0.05
RETRY_PAUSE_S = 0.05
CREATED = re.compile(r"created job (\S+) ")


@dataclass(frozen=True, slots=True)
class Probe:
    """One CreateJob: its job id and partition, when it was sent and answered (monotonic)."""

    job_id: str
    partition: int
    sent: float
    done: float
    ok: bool
    error: str = ""


class Creators:
    """Which member created each job, by the members' logs ("created job <id>"), read
    incrementally: the line is written before the create is answered."""

    def __init__(self, logs: dict[str, Path]) -> None:
        self._logs = logs
        self._offsets = dict.fromkeys(logs, 0)
        self._made: dict[str, str] = {}

    def _refresh(self) -> None:
        for name, path in self._logs.items():
            with path.open("rb") as fh:
                fh.seek(self._offsets[name])
                data = fh.read()
            whole = data[:data.rfind(b"\n") + 1]  # a line still being written waits
            self._offsets[name] += len(whole)
            for job_id in CREATED.findall(whole.decode(errors="replace")):
                self._made.setdefault(job_id, name)

    def of(self, job_id: str) -> str:
        """The creator of `job_id` ("" if no log names it yet)."""
        if job_id not in self._made:
            self._refresh()
        return self._made.get(job_id, "")


@dataclass
class Prober:
    """Writes to `partitions` (in turn) through one client, back to back, until `stop`."""

    client: PelotonClient
    pool: str
    partitions: tuple[int, ...]
    stop: threading.Event
    probes: list[Probe] = field(default_factory=list)

    def run(self) -> None:
        for partition in itertools.cycle(self.partitions):
            if self.stop.is_set():
                return
            probe = create(self.client, self.pool, partition)
            self.probes.append(probe)
            time.sleep(PROBE_INTERVAL_S if probe.ok else RETRY_PAUSE_S)

    def acked(self) -> list[Probe]:
        return [p for p in self.probes if p.ok]

    def failed(self) -> list[Probe]:
        return [p for p in self.probes if not p.ok]


def create(client: PelotonClient, pool: str, partition: int) -> Probe:
    """One probe: a one-task batch job created with an id of `partition`."""
    job_id = job_id_in(partition)
    sent = time.monotonic()
    try:
        client.create_job(job_config(pool, 1, PROBE_CPU, "true"), job_id=job_id)
    except PelotonError as exc:
        return Probe(job_id, partition, sent, time.monotonic(), False,
                     f"{type(exc).__name__}: {str(exc)[:120]}")
    return Probe(job_id, partition, sent, time.monotonic(), True)


def taken_over(zk: KazooClient, root: str, partitions: tuple[int, ...],
               survivor: str) -> dict[int, threading.Event]:
    """Per partition, an event set once ZooKeeper names `survivor` its holder (watches
    of the bench's own session: nothing asks the members)."""
    base = role_path(root, JOB_MANAGER, PARTITIONS)
    events = {p: threading.Event() for p in partitions}

    def watch(partition: int) -> None:
        def seen(data: bytes | None, _stat: object) -> bool:
            if data == survivor.encode():
                events[partition].set()
                return False  # done watching
            return True

        DataWatch(zk, f"{base}/{partition}", seen)

    for partition in partitions:
        watch(partition)
    return events


def write_when_held(client: PelotonClient, pool: str, partition: int, held: threading.Event,
                    creators: Creators, survivor: str, deadline: float,
                    probes: list[Probe]) -> float | None:
    """Once `survivor` holds `partition` in ZooKeeper, write to it until a write the
    survivor itself made is acknowledged; the monotonic time it was (None by `deadline`).
    Nothing is sent before, so 30-odd waiting writers do not load the survivor they wait
    for (each call waiting in a member for a partition between owners polls for its
    owner).  Every probe is kept in `probes`."""
    if not held.wait(max(0.0, deadline - time.monotonic())):
        return None
    while time.monotonic() < deadline:
        probe = create(client, pool, partition)
        probes.append(probe)
        if probe.ok:
            try:  # the line is written before the answer; this only rides out a slow read
                until(partial(creators.of, probe.job_id), PROBE_TIMEOUT_S,
                      f"the log line of job {probe.job_id}", interval=0.02)
            except RuntimeError:
                pass
            if creators.of(probe.job_id) == survivor:
                return probe.done
        time.sleep(RETRY_PAUSE_S)
    return None


def job_id_in(partition: int) -> str:
    """A fresh job id of `partition` (about 64 uuid draws)."""
    while partition_of(job_id := str(uuid.uuid4()), DEFAULT_PARTITIONS) != partition:
        pass
    return job_id
