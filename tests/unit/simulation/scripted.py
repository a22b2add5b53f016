"""A scripted `Simulator` for tests: it replays hand-written recorder calls, it schedules nothing.

The report's numbers are checked against cases computed by hand: a test writes
down what the real scheduler would do in a small case (two pools, known shares,
known arrivals) as a list of recorder calls per run, and the report built from
them must show the hand-computed waits, means and percentiles.  No second
scheduler is written here: the script *is* the hand computation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from peloton.core.model.resources import Resources
from peloton.simulation.engine import RunStats
from peloton.simulation.recorder import SimulationRecorder
from peloton.simulation.result import TaskEventKind
from peloton.simulation.scenario import Scenario

#: Memory per cpu in the scripted cases (their tasks ask 1024 MB per core).
MB_PER_CPU = 1024.0


def cpu(cores: float) -> Resources:
    """`cores` cpu with the cases' matching memory."""
    return Resources(cpu=cores, mem_mb=cores * MB_PER_CPU)


@dataclass(frozen=True)
class Tasks:
    """`kind` for instances `instances` of `job` at `t`."""

    t: float
    kind: TaskEventKind
    job: str
    instances: Sequence[int]
    reason: str = ""


@dataclass(frozen=True)
class Pool:
    """A sample of `pool` at `t`, in cpu cores (memory follows at MB_PER_CPU)."""

    t: float
    pool: str
    demand: float
    entitlement: float
    allocation: float
    pending: int


@dataclass(frozen=True)
class Cluster:
    """A cluster sample at `t`, in cpu cores."""

    t: float
    capacity: float
    used: float
    hosts: int


@dataclass(frozen=True)
class Finish:
    """The run ends at `t`."""

    t: float


Call = Tasks | Pool | Cluster | Finish


class ScriptedSimulator:
    """Replays `scripts[scenario.label]` onto the recorder."""

    def __init__(self, scripts: Mapping[str, Sequence[Call]], wall_secs: float = 0.25) -> None:
        self.scripts = scripts
        self.wall_secs = wall_secs
        self.scenarios: list[Scenario] = []

    def run(self, scenario: Scenario, recorder: SimulationRecorder) -> RunStats:
        """Make the scripted calls; the run 'took' `wall_secs`."""
        self.scenarios.append(scenario)
        end = 0.0
        for call in self.scripts[scenario.label]:
            if isinstance(call, Tasks):
                for i in call.instances:
                    recorder.task_event(call.t, call.kind, call.job, i, reason=call.reason)
            elif isinstance(call, Pool):
                recorder.pool_sample(call.t, call.pool, demand=cpu(call.demand),
                                     entitlement=cpu(call.entitlement), allocation=cpu(call.allocation),
                                     pending=call.pending)
            elif isinstance(call, Cluster):
                recorder.cluster_sample(call.t, capacity=cpu(call.capacity), used=cpu(call.used),
                                        hosts=call.hosts)
            else:
                recorder.finish(call.t)
                end = call.t
        return RunStats(simulated_secs=end, wall_secs=self.wall_secs)
