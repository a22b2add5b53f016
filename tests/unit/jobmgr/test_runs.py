"""Pure task-runtime changes: new runs, launches and host events."""

from __future__ import annotations

import dataclasses

from peloton.core.model.events import PodEvent
from peloton.core.model.task import TaskRuntime, TerminationReason
from peloton.core.ports import HostEvent
from peloton.core.states import HealthState, TaskState
from peloton.jobmgr import runs

S = TaskState


def _event(state: TaskState, ts: float = 10.0, **kw: object) -> HostEvent:
    return HostEvent(offset=1, run_id="x", state=state, hostname="h1", agent_id="a1",
                     timestamp=ts, **kw)  # type: ignore[arg-type]


def _running(goal: TaskState = S.SUCCEEDED) -> TaskRuntime:
    rt = runs.initial(goal, 1, 1.0)
    rt = runs.launched(rt, "h1", "a1", (("http", 31000),), 2.0)
    running = runs.apply_event(rt, 1, _event(S.RUNNING, 3.0))
    assert running is not None
    return running


def test_new_run_grows_run_id_and_takes_desired_config() -> None:
    rt = dataclasses.replace(_running(), state=S.FAILED, desired_config_version=2)
    nxt = runs.new_run(rt, 5.0)
    assert (nxt.run_id, nxt.prev_run_id, nxt.state) == (2, 1, S.INITIALIZED)
    assert nxt.config_version == 2 and nxt.host == "" and nxt.ports == ()


def test_new_run_honours_a_higher_desired_run() -> None:
    rt = dataclasses.replace(_running(), state=S.KILLED, desired_run_id=7)
    assert runs.new_run(rt, 5.0).run_id == 7


def test_running_sets_start_time_once_and_duplicates_are_dropped() -> None:
    rt = _running()
    assert rt.state is S.RUNNING and rt.start_time == 3.0
    assert runs.apply_event(rt, 1, _event(S.RUNNING, 9.0)) is None


def test_event_for_another_run_is_ignored() -> None:
    assert runs.apply_event(_running(), 2, _event(S.FAILED)) is None


def test_failure_counts_and_keeps_exit_code() -> None:
    rt = runs.apply_event(_running(), 1, _event(S.FAILED, exit_code=3,
                                                 message="exited with code 3"))
    assert rt is not None and rt.state is S.FAILED
    assert rt.failure_count == 1 and rt.exit_code == 3 and rt.message == "exited with code 3"


def test_requested_kill_is_not_a_failure_but_unexpected_kill_is() -> None:
    asked = runs.killing(_running(), 4.0, TerminationReason.KILLED_ON_REQUEST)
    done = runs.apply_event(asked, 1, _event(S.KILLED))
    assert done is not None and done.failure_count == 0
    surprise = runs.apply_event(_running(), 1, _event(S.KILLED))
    assert surprise is not None and surprise.failure_count == 1


def test_service_success_counts_as_failure() -> None:
    rt = runs.apply_event(_running(goal=S.RUNNING), 1, _event(S.SUCCEEDED))
    assert rt is not None and rt.failure_count == 1


def test_terminal_run_cannot_be_resurrected_by_a_late_event() -> None:
    done = runs.apply_event(_running(), 1, _event(S.SUCCEEDED))
    assert done is not None
    assert runs.apply_event(done, 1, _event(S.RUNNING)) is None


def test_health_event_updates_health_of_a_running_task() -> None:
    rt = dataclasses.replace(_running(), healthy=HealthState.HEALTH_UNKNOWN)
    healthy = runs.apply_event(rt, 1, _event(S.RUNNING, healthy="HEALTHY"))
    assert healthy is not None and healthy.healthy is HealthState.HEALTHY


def test_pod_event_records_every_field_of_the_runtime() -> None:
    # pod_event builds the event positionally (hot path): a field out of order would
    # record, say, the host as the agent.  Compared against the keyword form.
    rt = TaskRuntime(state=S.RUNNING, goal_state=S.SUCCEEDED, run_id=4, prev_run_id=3,
                     desired_run_id=5, host="h1", agent_id="a1", config_version=2,
                     desired_config_version=3, message="m", reason="r",
                     healthy=HealthState.HEALTHY, update_time=12.5)
    assert runs.pod_event("j", 7, rt) == PodEvent(
        job_id="j", instance=7, run_id=4, state=S.RUNNING, goal_state=S.SUCCEEDED,
        time=12.5, prev_run_id=3, desired_run_id=5, host="h1", agent_id="a1",
        config_version=2, desired_config_version=3, message="m", reason="r",
        healthy=HealthState.HEALTHY)


def test_initial_runtimes_are_at_the_revision_they_are_created_with() -> None:
    # create_tasks stores new runtimes at revision 1 and copies any that is not.
    assert runs.initial(S.SUCCEEDED, 1, 1.0).revision == 1
    assert runs.initial(S.KILLED, 1, 1.0, stopped=True).revision == 1


def test_texts_of_placements_and_events_are_held_once_per_value() -> None:
    # Every event and placement brings its own copy of the host, agent, message and reason;
    # the cache keeps one runtime per active task, so equal texts must be one object.
    def fresh(text: str) -> str:
        return "".join(list(text))  # an equal text that is another object

    def event(state: TaskState, ts: float, message: str, reason: str = "") -> HostEvent:
        return HostEvent(offset=1, run_id="x", state=state, hostname=fresh("host-1"),
                         agent_id=fresh("agent-1"), timestamp=ts, message=fresh(message),
                         reason=fresh(reason))

    ended = []
    for _ in range(2):
        placed = runs.launched(runs.initial(S.SUCCEEDED, 1, 1.0), fresh("host-1"),
                               fresh("agent-1"), (), 2.0)
        running = runs.apply_event(placed, 1, event(S.RUNNING, 3.0, "started"))
        assert running is not None and running.message == "started"
        done = runs.apply_event(running, 1, event(S.SUCCEEDED, 4.0, "done",
                                                  "REASON_COMMAND_EXITED"))
        assert done is not None
        ended.append(done)
    first, second = ended
    assert first == second and first.reason == "REASON_COMMAND_EXITED"
    for name in ("host", "agent_id", "message", "reason"):
        assert getattr(first, name) is getattr(second, name), name

    # A text given as a str enum (not interned by Python) is taken as it is.
    failed = runs.apply_event(runs.launched(runs.initial(S.SUCCEEDED, 1, 1.0), "h", "a", (),
                                            2.0),
                              1, HostEvent(offset=1, run_id="x", state=S.FAILED, hostname="h",
                                           agent_id="a", timestamp=3.0,
                                           reason=TerminationReason.FAILED))
    assert failed is not None and failed.reason == "FAILED"
