"""A scenario: everything one simulation run replays, fully resolved, as plain values.

The planner (`whatif.plan`) builds one from the trace, CLUSTER.yaml, POOLS.yaml and
(optionally) a what-if; a `Simulator` replays it.  Nothing in a scenario needs
interpreting: host selectors are resolved to host names, partial pool edits to
whole pool configs, arrival scaling to new submit times.  So two runs of the same
scenario with the same seed must make the same calls on the recorder.

The timeline holds the actions that happen *during* the run, sorted by time
(file order among equal times).  Actions at t = 0 are in the timeline too: a
simulator applies every action due at time t before it submits the jobs due at t.
"""

from __future__ import annotations

from dataclasses import dataclass

from peloton.core.model.respool import ResourcePoolConfig
from peloton.simulation.cluster import SimHost
from peloton.simulation.pools import PoolsSpec
from peloton.simulation.trace import Trace

#: Wall-clock epoch seconds of t = 0 when the trace does not say (fixed, for determinism).
DEFAULT_EPOCH = 1_700_000_000.0
#: How often a simulator samples every pool and the cluster, by default (simulated seconds).
DEFAULT_SAMPLE_INTERVAL = 60.0
#: Time a run goes on after the trace's ideal end, by default, so late tasks can still finish.
DEFAULT_GRACE = 3600.0


@dataclass(frozen=True, slots=True)
class SetPoolConfig:
    """From `at` on, pool `path` has `config` (its whole config, not an edit).

    `previous` is the config it replaces (for the report's description only).
    """

    at: float
    path: str
    config: ResourcePoolConfig
    previous: ResourcePoolConfig | None = None


@dataclass(frozen=True, slots=True)
class DrainHosts:
    """Put hosts into maintenance at `at`: their tasks move elsewhere, then the hosts go down."""

    at: float
    hostnames: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class RemoveHosts:
    """Hosts disappear at `at` without warning: their running tasks are lost."""

    at: float
    hostnames: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class AddHosts:
    """New hosts join the cluster at `at`."""

    at: float
    hosts: tuple[SimHost, ...]


@dataclass(frozen=True, slots=True)
class SetPreemption:
    """From `at` on, the resource manager may (or may not) preempt."""

    at: float
    enabled: bool


Action = SetPoolConfig | DrainHosts | RemoveHosts | AddHosts | SetPreemption


def describe(action: Action) -> str:
    """One line for the report: what happens when."""
    at = f"t={action.at:g}s"
    if isinstance(action, SetPoolConfig):
        return f"{at}: pool {action.path}: " + "; ".join(_pool_changes(action))
    if isinstance(action, DrainHosts):
        return f"{at}: drain {len(action.hostnames)} host(s) ({_names(action.hostnames)})"
    if isinstance(action, RemoveHosts):
        return f"{at}: remove {len(action.hostnames)} host(s) ({_names(action.hostnames)})"
    if isinstance(action, AddHosts):
        names = tuple(h.hostname for h in action.hosts)
        return f"{at}: add {len(names)} host(s) ({_names(names)})"
    return f"{at}: preemption {'on' if action.enabled else 'off'}"


def _num(value: float) -> str:
    value = float(value)
    return str(int(value)) if value.is_integer() else f"{value:.6g}"


def _pool_changes(action: SetPoolConfig) -> list[str]:
    """`cpu reservation 64 -> 128` for every value that differs from the previous config."""
    parts = []
    for rc in action.config.resources:
        old = action.previous.resource(rc.kind) if action.previous else None
        for name in ("reservation", "limit", "share"):
            new_value = getattr(rc, name)
            old_value = getattr(old, name) if old else None
            if old_value is None:
                parts.append(f"{rc.kind.value} {name} {_num(new_value)}")
            elif old_value != new_value:
                parts.append(f"{rc.kind.value} {name} {_num(old_value)} -> {_num(new_value)}")
    return parts or ["no change"]


def _names(names: tuple[str, ...]) -> str:
    if len(names) <= 3:
        return ", ".join(names)
    return f"{names[0]}, {names[1]}, ..., {names[-1]}"


@dataclass(frozen=True, slots=True)
class Scenario:
    """One run's complete input (see the module docstring)."""

    #: "baseline", or the what-if's name: how the report labels this run.
    label: str
    trace: Trace
    #: The hosts at t = 0, in a fixed order.
    hosts: tuple[SimHost, ...]
    pools: PoolsSpec
    #: Whether the resource manager may preempt at t = 0.
    preemption: bool
    timeline: tuple[Action, ...]
    #: The run stops at this simulated time at the latest (seconds since t = 0).
    horizon: float
    sample_interval: float = DEFAULT_SAMPLE_INTERVAL
    seed: int = 0
    #: Wall-clock epoch seconds the daemons' clocks read at t = 0.
    epoch: float = DEFAULT_EPOCH
    #: The what-if's changes in words (empty for the baseline), for the report.
    changes: tuple[str, ...] = ()
    #: Arrival-rate factor the trace was scaled by (1 = as recorded).
    arrival_scale: float = 1.0
    #: The simulated time the run starts at (the daemons' monotonic clocks read it then;
    #: the trace, the timeline and the horizon count on that clock too).  0 for a replay; a
    #: forecast starts where the live resource manager's clock stood, so the daemons' float
    #: arithmetic on times (sums, differences, quotients by a period) rounds as live.
    origin: float = 0.0
