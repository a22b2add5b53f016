"""The `Simulator` seam: what replays a scenario, and how the CLI finds one.

The real simulator, `peloton.simulation.driver.PelotonSimulator`, runs the
resource manager, placement engine and job manager on simulated hosts and a
simulated clock.  It is imported on first use, so the CLI does not load the
daemons to check inputs; were it missing from an installation,
`load_simulator("peloton")` would raise `Unimplemented` and `peloton simulate`
exit with code 11.

Contract of `Simulator.run(scenario, recorder)`:
- set up, before t = 0: the pools of `scenario.pools` (paths as given), the hosts
  of `scenario.hosts` (name, resources, labels), preemption on or off as
  `scenario.preemption` says; the daemons' wall clocks read `scenario.epoch` at
  t = 0 and all of them read one simulated clock;
- at each time t, first apply the timeline actions due at t, then submit the
  trace jobs due at t (in trace order), each as one job built with
  `jobs.job_spec_for` in its pool; each instance runs for
  `TraceJob.duration_of(instance)` once started (a SERVICE until the end);
- report to `recorder` as its module docstring requires (events, samples every
  `scenario.sample_interval`, PENDING_AT_END reasons, `finish`);
- stop at `scenario.horizon`, or earlier once every job is submitted, every batch
  task has finished, no service is in the trace and the timeline is done;
- be deterministic: the same scenario (seed included) gives the same calls on the
  recorder in the same order, so the report is the same byte for byte;
- return `RunStats` (wall time spent, for the speed-up the CLI prints on stderr;
  it never enters the report, which must not depend on the machine's speed).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from peloton.core.errors import InvalidArgument, Unimplemented
from peloton.simulation.recorder import ResultRecorder, SimulationRecorder
from peloton.simulation.result import SimulationResult
from peloton.simulation.scenario import Scenario


@dataclass(frozen=True, slots=True)
class RunStats:
    """How long a run took: simulated seconds and the wall-clock seconds it cost."""

    simulated_secs: float
    wall_secs: float

    @property
    def speedup(self) -> float:
        """Simulated time per wall-clock time (inf for an instant run)."""
        return self.simulated_secs / self.wall_secs if self.wall_secs > 0 else float("inf")


class Simulator(Protocol):
    """Replays scenarios (see the module docstring for the contract)."""

    def run(self, scenario: Scenario, recorder: SimulationRecorder) -> RunStats:
        """Replay `scenario`, reporting to `recorder`; return the run's timing."""
        ...


SimulatorFactory = Callable[[], Simulator]

#: Engine name -> "module:callable" making a Simulator (imported on use, so the CLI does not
#: load the daemons until a run needs them).
ENGINES: dict[str, str] = {"peloton": "peloton.simulation.driver:PelotonSimulator"}
#: Engines registered in-process (tests register scripted ones here).
_FACTORIES: dict[str, SimulatorFactory] = {}

NOT_AVAILABLE = ("the simulation engine (peloton.simulation.driver) is not installed. Every input "
                 "file was read and checked; `peloton simulate check` validates them too.")


def register_simulator(name: str, factory: SimulatorFactory) -> None:
    """Make `factory` the engine called `name` (replacing any before)."""
    _FACTORIES[name] = factory


def load_simulator(name: str = "peloton") -> Simulator:
    """The simulator called `name`; Unimplemented while the real engine does not exist."""
    factory = _FACTORIES.get(name)
    if factory is not None:
        return factory()
    target = ENGINES.get(name)
    if target is None:
        known = ", ".join(sorted({*ENGINES, *_FACTORIES}))
        raise InvalidArgument(f"unknown simulation engine {name!r} (known: {known})", field="engine")
    module_name, attr = target.split(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise
        raise Unimplemented(NOT_AVAILABLE) from None
    made: Simulator = getattr(module, attr)()
    return made


def run_scenario(simulator: Simulator, scenario: Scenario) -> tuple[SimulationResult, RunStats]:
    """Run one scenario through a checking `ResultRecorder`; its result and timing."""
    recorder = ResultRecorder(scenario)
    stats = simulator.run(scenario, recorder)
    return recorder.result(), stats
