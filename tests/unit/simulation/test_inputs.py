"""CLUSTER.yaml, POOLS.yaml, CHANGES.yaml, and the planner that turns them into scenarios."""

from __future__ import annotations

from pathlib import Path

import pytest

from peloton.core.errors import InvalidArgument
from peloton.core.model.constraints import Label
from peloton.core.model.resources import Resources
from peloton.simulation.cluster import read_cluster
from peloton.simulation.errors import InputError
from peloton.simulation.pools import load_pools, pools_from_data, pools_to_data, read_pools
from peloton.simulation.scenario import AddHosts, DrainHosts, RemoveHosts, SetPoolConfig, SetPreemption
from peloton.simulation.trace import Trace, TraceHeader, TraceJob
from peloton.simulation.whatif import PlanOptions, parse_seconds, plan, read_whatif, resolve

REPO = Path(__file__).resolve().parents[3]
DATA = Path(__file__).parent / "data"

CLUSTER = """
version: 1
preemption: false
hosts:
  - group: small
    count: 5
    resources: {cpu: 4, mem_mb: 8192}
    labels: {zone: [a, b], kind: small, gen: 3}
  - group: big
    count: 2
    resources: {cpu: 32, mem_mb: 131072, gpu: 2}
"""

POOLS = """
version: 1
pools:
  - name: batch
    resources:
      - {kind: cpu, reservation: 20, limit: 40, share: 1}
    children:
      - name: adhoc
        resources: [{kind: cpu, reservation: 10, limit: 40, share: 1}]
      - name: etl
        resources: [{kind: cpu, reservation: 5, limit: 40, share: 2}]
  - name: services
    resources: [{kind: cpu, reservation: 20, limit: 60, share: 1, type: STATIC}]
"""


def test_cluster_groups_expand_to_named_hosts_with_labels_dealt_round_robin() -> None:
    cluster = read_cluster(CLUSTER)
    hosts = cluster.hosts()
    assert [h.hostname for h in hosts] == [*(f"small-{i:05d}" for i in range(5)), "big-00000", "big-00001"]
    assert hosts[0].labels == (Label("gen", "3"), Label("kind", "small"), Label("zone", "a"))
    assert [h.labels[-1].value for h in hosts[:5]] == ["a", "b", "a", "b", "a"]
    assert cluster.capacity() == Resources(cpu=84, mem_mb=5 * 8192 + 2 * 131072, gpu=4)
    assert cluster.preemption is False and cluster.host_count == 7


@pytest.mark.parametrize(("text", "message"), [
    ("version: 1\nhosts: []", "cluster.yaml: hosts: must list at least one host group"),
    ("version: 2\nhosts: []", "cluster.yaml: version: cluster file version 2 is not supported"),
    ("version: 1\nhosts:\n - {group: A, count: 1, resources: {cpu: 1}}", "hosts[0].group: group name 'A'"),
    ("version: 1\nhosts:\n - {group: a, count: 0, resources: {cpu: 1}}", "hosts[0].count: must be >= 1"),
    ("version: 1\nhosts:\n - {group: a, count: 1, resources: {cpu: -1}}",
     "hosts[0].resources.cpu: must be >= 0"),
    ("version: 1\nhosts:\n - {group: a, count: 1, resources: {cpus: 1}}",
     "hosts[0].resources.cpus: unknown key"),
    ("version: 1\nhosts:\n - {group: a, count: 1, resources: {cpu: 1}}\n"
     " - {group: a, count: 1, resources: {cpu: 1}}", "hosts[1].group: group 'a' is defined twice"),
    ("version: 1\nhosts:\n - {group: a, count: 1, resources: {cpu: 1}, labels: {z: []}}",
     "hosts[0].labels.z: a list of values must not be empty"),
    ("version: 1\nhosts: [\n", "cluster.yaml:3: invalid YAML"),
    ("version: 1\npreemption: 1\nhosts:\n - {group: a, count: 1, resources: {cpu: 1}}",
     "preemption: expected true or false, got 1"),
])
def test_cluster_errors_name_the_field(text: str, message: str) -> None:
    with pytest.raises(InputError) as err:
        read_cluster(text)
    assert message in str(err.value)


def test_pools_form_a_tree_of_respool_documents() -> None:
    pools = read_pools(POOLS)
    assert pools.paths() == ("/batch", "/batch/adhoc", "/batch/etl", "/services")
    assert pools.leaves() == ("/batch/adhoc", "/batch/etl", "/services")
    assert pools.get("/batch/etl").config.parent_id == "/batch"
    assert pools.get("/services").config.parent_id == "root"
    assert pools_from_data(pools_to_data(pools)) == pools


def test_a_pool_can_come_from_a_respool_yaml_file(tmp_path: Path) -> None:
    example = REPO / "docs" / "examples" / "respool.yaml"
    (tmp_path / "pools.yaml").write_text(
        f"version: 1\npools:\n  - file: {example}\n  - file: {example}\n    name: Second\n")
    pools = load_pools(tmp_path / "pools.yaml")
    assert pools.paths() == ("/DefaultResPool", "/Second")
    assert pools.get("/Second").config.owning_team == "tour"


@pytest.mark.parametrize(("text", "message"), [
    ("version: 1\npools:\n - name: a\n   resources: [{kind: cpu, reservation: 8, limit: 4}]",
     "pools: pool 'a': cpu limit 4 is below its reservation 8"),
    ("version: 1\npools:\n - name: a\n   colour: red", "pools[0].colour: unknown key of a resource pool"),
    ("version: 1\npools:\n - name: a\n   resources: [{kind: cpus}]", "pools[0].resources[0].kind"),
    ("version: 1\npools:\n - name: a\n   children:\n    - name: b\n      parent: {value: a}",
     "pools[0].children[0].parent: the tree gives a pool its parent"),
    ("version: 1\npools:\n - name: a\n - name: a", "pools: resource pool '/a' already exists"),
    ("version: 1\npools:\n - name: a\n   resources: [{kind: cpu, reservation: 1, limit: 2}]\n"
     "   children:\n    - name: b\n      resources: [{kind: cpu, reservation: 2, limit: 2}]",
     "reservations of the children of /a would sum to 2, above its reservation 1"),
    ("version: 1\npools: []", "pools: must list at least one pool"),
    ("version: 1\npools:\n - file: /nonexistent/x.yaml", "/nonexistent/x.yaml: cannot read"),
])
def test_pool_errors_name_the_pool(text: str, message: str) -> None:
    with pytest.raises(InputError) as err:
        read_pools(text)
    assert message in str(err.value)


CHANGES = """
version: 1
name: big-change
changes:
  - pool: /batch/etl
    resources: [{kind: cpu, reservation: 8, share: 3}]
  - drain: {count: 2, labels: {zone: a}}
    at: 1h
    batch: 1
    every: 10m
  - remove: {group: small, count: 1}
    at: 30m
  - add: {group: extra, count: 2, resources: {cpu: 8, mem_mb: 4096}, labels: {zone: c}}
    at: 2h
  - preemption: true
    at: 90s
  - scale_arrivals: 2
"""


def test_changes_resolve_to_concrete_actions_in_time_order() -> None:
    whatif = read_whatif(CHANGES)
    assert whatif.name == "big-change" and whatif.scale_arrivals == 2.0
    actions = resolve(whatif, read_cluster(CLUSTER), read_pools(POOLS))
    assert [type(a) for a in actions] == [SetPoolConfig, SetPreemption, RemoveHosts, DrainHosts,
                                          DrainHosts, AddHosts]
    pool = actions[0]
    assert isinstance(pool, SetPoolConfig) and pool.at == 0
    cpu = pool.config.resources[0]
    assert (cpu.reservation, cpu.limit, cpu.share) == (8, 40, 3)  # limit kept, others edited
    assert actions[2] == RemoveHosts(1800, ("small-00000",))
    # small-00000 (zone a) is gone by 1h, so the drain takes the next zone-a hosts, one per 10 min.
    assert actions[3] == DrainHosts(3600, ("small-00002",))
    assert actions[4] == DrainHosts(4200, ("small-00004",))
    added = actions[5]
    assert isinstance(added, AddHosts) and [h.hostname for h in added.hosts] == ["extra-00000",
                                                                                "extra-00001"]


@pytest.mark.parametrize(("change", "message"), [
    ("- pool: /nope\n    resources: [{kind: cpu, reservation: 1}]", "changes[0].pool: no pool '/nope'"),
    ("- pool: /batch/etl\n    resources: [{kind: cpu, reservation: 30}]",
     "changes[0].resources: pool 'etl': cpu reservations of the children of /batch would sum to 40"),
    ("- drain: {count: 4, labels: {zone: a}}", "changes[0].drain: 4 host(s) of zone=a wanted at t=0s, "
                                               "but 3 such host(s) are left"),
    ("- remove: {group: tiny}", "changes[0].remove.group: no host group 'tiny'"),
    ("- add: {group: small, count: 1, resources: {cpu: 1}}",
     "changes[0].add.group: host group 'small' already exists"),
])
def test_changes_that_cannot_happen_are_refused(change: str, message: str) -> None:
    whatif = read_whatif(f"version: 1\nchanges:\n  {change}\n")
    with pytest.raises(InvalidArgument) as err:
        resolve(whatif, read_cluster(CLUSTER), read_pools(POOLS))
    assert message in f"{err.value.field}: {err.value}"


@pytest.mark.parametrize(("change", "message"), [
    ("- {pool: /a, drain: {count: 1}}", "changes[0]: must have exactly one of"),
    ("- {}", "changes[0]: must have exactly one of"),
    ("- {drain: {}}", "changes[0].drain: name a count, a group or labels"),
    ("- {drain: {count: 1}, every: 5m}", "changes[0].every: `every` needs `batch`"),
    ("- {drain: {count: 1}, at: soon}", "changes[0].at: must be seconds or a duration"),
    ("- {preemption: true, resources: []}", "changes[0].resources: unknown key"),
    ("- {pool: /a, resources: [{kind: cpu}]}", "changes[0].resources[0]: give a reservation"),
    ("- {pool: /a, resources: [{kind: gpus, limit: 1}]}", "changes[0].resources[0].kind: unknown"),
    ("- {scale_arrivals: 0}", "changes[0].scale_arrivals: must be > 0"),
    ("- {scale_arrivals: 2}\n  - {scale_arrivals: 3}", "changes[1]: scale_arrivals may be given once"),
])
def test_what_if_file_errors_name_the_change(change: str, message: str) -> None:
    with pytest.raises(InputError) as err:
        read_whatif(f"version: 1\nchanges:\n  {change}\n", "w.yaml")
    assert f"w.yaml: {message}" in str(err.value)


def test_durations_in_what_if_files() -> None:
    assert parse_seconds("1h30m", "at") == 5400
    assert parse_seconds("1d", "at") == 86400
    assert parse_seconds(90, "at") == 90
    with pytest.raises(InvalidArgument):
        parse_seconds(-1, "at")


def _trace(*jobs: TraceJob) -> Trace:
    return Trace(TraceHeader(name="t"), jobs)


def _job(name: str, submit: float, pool: str = "/batch/adhoc", duration: float = 100) -> TraceJob:
    return TraceJob(name, submit, pool, 1, Resources(cpu=1), duration)


def test_plan_scales_arrivals_and_shares_one_horizon() -> None:
    trace = _trace(_job("a", 0), _job("b", 1000))
    whatif = read_whatif(CHANGES)
    base, other = plan(trace, read_cluster(CLUSTER), read_pools(POOLS), whatif)
    assert other is not None
    assert [j.submit for j in base.trace.jobs] == [0, 1000]
    assert [j.submit for j in other.trace.jobs] == [0, 500]
    # ideal end 1100 (baseline), last action at 7200 (what-if), plus the 1 h grace.
    assert base.horizon == other.horizon == 7200 + 3600
    assert base.timeline == () and len(other.timeline) == 6
    assert other.label == "big-change" and other.changes[-1].startswith("arrivals x2")
    assert base.preemption is False and len(base.hosts) == 7


def test_plan_refuses_jobs_outside_leaf_pools() -> None:
    with pytest.raises(InvalidArgument, match="names pool /batch, which is an inner pool"):
        plan(_trace(_job("a", 0, "/batch")), read_cluster(CLUSTER), read_pools(POOLS))
    with pytest.raises(InvalidArgument, match="names pool /x, which is not in the pools file"):
        plan(_trace(_job("a", 0, "/x")), read_cluster(CLUSTER), read_pools(POOLS))
    with pytest.raises(InvalidArgument, match="sample interval"):
        plan(_trace(), read_cluster(CLUSTER), read_pools(POOLS), options=PlanOptions(sample_interval=0))


def test_the_committed_example_inputs_are_valid() -> None:
    from peloton.simulation.cluster import load_cluster
    from peloton.simulation.trace_io import load_trace
    from peloton.simulation.whatif import load_whatif

    examples = REPO / "docs" / "examples" / "simulation"
    _, other = plan(load_trace(examples / "sample-trace.jsonl"), load_cluster(examples / "cluster.yaml"),
                    load_pools(examples / "pools.yaml"), load_whatif(examples / "research-reservation.yaml"))
    assert other is not None and other.label == "research-128"
    assert other.changes == ("t=0s: pool /research: cpu reservation 64 -> 128",)
