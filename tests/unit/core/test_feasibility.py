"""Could any UP host ever hold a task (core/feasibility.py), and how it reads (core/words.py)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from peloton.core import words
from peloton.core.feasibility import (
    HostShape,
    admission_need,
    asks_to_queue,
    distinct_tasks,
    job_asks_to_queue,
    job_never_fits,
    never_fits,
    over_limit,
)
from peloton.core.model.constraints import (
    AndConstraint,
    Condition,
    Constraint,
    Label,
    LabelConstraint,
    LabelKind,
    OrConstraint,
)
from peloton.core.model.ids import TaskId
from peloton.core.model.job import JobSpec, SlaSpec
from peloton.core.model.resources import ResourceKind, Resources
from peloton.core.model.task import TaskSpec
from peloton.core.placement.request import PlacementNeeds, TaskRequest
from peloton.core.placement.stack import PlacementConfig, Placer
from peloton.core.states import JobType
from tests.unit.core.factories import host

MARS = LabelConstraint(LabelKind.HOST, Condition.EQUAL, Label("zone", "mars"), 1)


def _task(cpu: float = 1, mem: float = 0, gpu: float = 0,
          constraint: Constraint | None = None) -> TaskSpec:
    return TaskSpec(resources=Resources(cpu, mem, 0, gpu), constraint=constraint)


def _shape(name: str, cpu: float = 2, mem: float = 4096, gpu: float = 0,
           labels: tuple[Label, ...] = (), up: bool = True) -> HostShape:
    return HostShape(name, Resources(cpu, mem, 10_000, gpu), labels, up)


# -- words ------------------------------------------------------------------------------------

def test_numbers_read_without_float_noise() -> None:
    assert words.number(2.77556e-17) == "0"
    assert words.number(1.93548) == "1.94"
    assert words.number(0.1 + 0.2) == "0.3"
    assert words.number(2.0) == "2"
    assert words.size_mb(512) == "512 MiB"
    assert words.size_mb(4096) == "4 GiB"
    assert words.size_mb(1536) == "1.5 GiB"
    assert words.size_mb(3 * 1024 * 1024) == "3 TiB"
    assert words.amount(ResourceKind.CPU, 0.5) == "0.5 cpu"
    assert words.resources(Resources(2, 4096, 0, 0)) == "2 cpu, 4 GiB memory"


def test_constraints_read_in_words() -> None:
    assert words.met(MARS) == "has label zone=mars"
    assert words.unmet(MARS) == "lacks label zone=mars"
    once = LabelConstraint(LabelKind.TASK, Condition.LESS_THAN, Label("job", "j1"), 1)
    assert words.unmet(once) == "already runs a task labelled job=j1"
    both = AndConstraint((MARS, once))
    assert words.met(both) == "(has label zone=mars and runs no task labelled job=j1)"
    either = OrConstraint((MARS, LabelConstraint(LabelKind.HOST, Condition.EQUAL,
                                                  Label("zone", "venus"), 1)))
    assert words.unmet(either) == "(lacks label zone=mars and lacks label zone=venus)"


# -- never_fits: examples ------------------------------------------------------------------------

def test_too_much_cpu_names_the_resource_and_the_largest_host() -> None:
    why = never_fits(_task(500), [_shape("small", 2), _shape("big", 4)])
    assert why is not None and why.field == "resources.cpu"
    assert "500 cpu" in why.message and "big" in why.message and "4 cpu" in why.message


def test_memory_in_mib_and_gib() -> None:
    why = never_fits(_task(1, mem=64 * 1024), [_shape("h", 8, 16 * 1024)])
    assert why is not None and why.field == "resources.memory"
    assert "64 GiB memory" in why.message and "16 GiB memory" in why.message


def test_more_gpus_than_any_host() -> None:
    why = never_fits(_task(1, gpu=4), [_shape("g", 8, gpu=2), _shape("c", 8)])
    assert why is not None and why.field == "resources.gpu"
    assert "4 gpu" in why.message and "g, has 2 gpu" in why.message


def test_no_host_with_the_label_in_words() -> None:
    why = never_fits(_task(1, constraint=MARS), [_shape("earth", labels=(Label("zone", "earth"),))])
    assert why is not None and why.field == "constraint"
    assert why.message == "no UP host has label zone=mars (1 host checked)"


def test_hostname_is_an_implicit_label() -> None:
    pin = LabelConstraint(LabelKind.HOST, Condition.EQUAL, Label("hostname", "b"), 1)
    assert never_fits(_task(1, constraint=pin), [_shape("a"), _shape("b")]) is None
    assert never_fits(_task(1, constraint=pin), [_shape("a")]) is not None


def test_hosts_not_up_do_not_count_but_an_empty_cluster_is_not_judged() -> None:
    assert never_fits(_task(4), [_shape("a", 2), _shape("b", 8, up=False)]) is not None
    assert never_fits(_task(4), [_shape("b", 8, up=False)]) is None
    assert never_fits(_task(4), []) is None


def test_kinds_that_fit_separately_but_not_together() -> None:
    why = never_fits(_task(4, mem=8192), [_shape("cpu", 8, 1024), _shape("mem", 1, 16384)])
    assert why is not None and "together" in why.message


def test_gpu_hosts_are_kept_for_gpu_tasks_and_exclusive_hosts_for_those_who_name_them() -> None:
    assert never_fits(_task(1), [_shape("g", gpu=1)]) is not None
    excl = _shape("x", labels=(Label("peloton/exclusive", "db"),))
    assert never_fits(_task(1), [excl]) is not None
    named = LabelConstraint(LabelKind.HOST, Condition.EQUAL, Label("peloton/exclusive", "db"), 1)
    assert never_fits(_task(1, constraint=named), [excl]) is None


def test_queue_anyway_label_on_job_task_or_aurora_metadata() -> None:
    assert asks_to_queue([Label("peloton/queue-anyway", "true")])
    assert asks_to_queue([Label("org.apache.aurora.metadata.peloton/queue-anyway", "true")])
    assert not asks_to_queue([Label("peloton/queue-anyway", "false")])
    spec = JobSpec("j", JobType.BATCH, 1, TaskSpec(labels=(Label("peloton/queue-anyway", "1"),)))
    assert job_asks_to_queue(spec)


def test_pool_limit_and_the_largest_gang() -> None:
    spec = JobSpec("j", JobType.BATCH, 10, _task(1), sla=SlaSpec(minimum_running_instances=6))
    assert admission_need(spec).cpu == 6
    why = over_limit(admission_need(spec), Resources(4, 1e9, 1e9, 1e9), "/p")
    assert why is not None and "6 cpu" in why.message and "/p" in why.message
    assert why.field == "resources.cpu"


def test_distinct_tasks_and_which_instance_is_named() -> None:
    spec = JobSpec("j", JobType.BATCH, 4, _task(1), instance_tasks={0: _task(9), 2: _task(1)})
    assert [(i, t.resources.cpu) for i, t in distinct_tasks(spec)] == [(1, 1), (0, 9)]
    why = job_never_fits(spec, [_shape("h", 2)])
    assert why is not None and why.message.startswith("instance 0 can never run")


# -- never_fits agrees with placement on an empty cluster -------------------------------------

labels = st.lists(st.sampled_from([Label("zone", "a"), Label("zone", "b"), Label("disk", "ssd")]),
                  max_size=2, unique=True).map(tuple)
shapes = st.lists(st.builds(_shape, st.sampled_from(["h1", "h2", "h3", "h4"]),
                            st.sampled_from([1.0, 2.0, 4.0]), st.sampled_from([1024.0, 8192.0]),
                            st.sampled_from([0.0, 0.0, 2.0]), labels, st.booleans()),
                  max_size=4, unique_by=lambda h: h.hostname)
constraints = st.one_of(st.none(), st.builds(
    LabelConstraint, st.just(LabelKind.HOST), st.sampled_from(list(Condition)),
    st.sampled_from([Label("zone", "a"), Label("disk", "ssd")]), st.integers(0, 1)))


@settings(max_examples=300, deadline=None)
@given(hosts=shapes, cpu=st.sampled_from([0.5, 2.0, 3.0, 8.0]),
       mem=st.sampled_from([0.0, 4096.0, 16384.0]), gpu=st.sampled_from([0.0, 1.0, 4.0]),
       constraint=constraints)
def test_never_fits_exactly_when_placement_on_empty_hosts_finds_none(
        hosts: list[HostShape], cpu: float, mem: float, gpu: float,
        constraint: LabelConstraint | None) -> None:
    task = _task(cpu, mem, gpu, constraint)
    why = never_fits(task, hosts)
    up = [h for h in hosts if h.up]
    if not up:
        assert why is None
        return
    offers = [host(h.hostname, h.capacity.cpu, h.capacity.mem_mb, h.capacity.disk_mb,
                   h.capacity.gpu, labels=(*h.labels, Label("hostname", h.hostname)))
              for h in up]
    placer = Placer(offers, PlacementConfig())
    request = TaskRequest(TaskId("job", 0), PlacementNeeds(task.resources, constraint=constraint))
    report = placer.explain(request)
    assert (why is None) == (report.hosts_fit > 0), (why, str(report))
