"""Curated views of the messages people read most: a stateless job, its workflows, the pool
tree with the cluster's capacity, and watch events.

Each turns one response into a few aligned lines or a table (cli/output.py);
`-o yaml|json` (or -j) prints the raw message instead, for scripts.  Numbers
read as in the rest of the CLI (peloton/core/words.py), enums without their
prefixes and never as INVALID (cli/views.py).
"""

from __future__ import annotations

from typing import Any

from cli import views
from cli.output import Output
from cli.table import Col
from peloton.api.explain import amounts
from peloton.api.gen.pelotonpy.ext import capacity_pb2
from peloton.core import words
from peloton.core.model.resources import Resources

POOLS = [Col("Pool"), Col("Reserved", drop=4), Col("Limit", drop=3), Col("Entitled", drop=2),
         Col("Allocated"), Col("Demand", drop=1), Col("Queued", drop=1)]
WORKFLOWS = [Col("#"), Col("Type"), Col("State"), Col("Done"), Col("Failed", drop=2),
             Col("Left", drop=1), Col("Version", drop=3), Col("Started", drop=4),
             Col("Ended", drop=5)]


def _stats(stats: Any) -> str:
    pairs = [(views.human_enum(k), int(v)) for k, v in stats.items() if int(v)]
    return " ".join(f"{k} {v}" for k, v in sorted(pairs)) or "none yet"


def workflow_line(wf: Any) -> str:
    """'UPDATE SUCCEEDED: 3 done, 0 failed, 0 left' ('' when the job never had one)."""
    state = views.enum_label(wf, "state")
    if not state:
        return ""
    return (f"{views.enum_label(wf, 'type')} {state}: {wf.num_instances_completed} done, "
            f"{wf.num_instances_failed} failed, {wf.num_instances_remaining} left")


def container_lines(spec: Any) -> list[tuple[str, str]]:
    """One ("Container <name>", "0.1 cpu, 32 MiB memory; <command>") per container."""
    out = []
    for c in spec.default_spec.containers:
        r = c.resource
        res = words.resources(Resources(r.cpu_limit, r.mem_limit_mb, r.disk_limit_mb,
                                        r.gpu_limit))
        command = " ".join([c.entrypoint.value, *c.entrypoint.arguments]).strip()
        ports = ", ".join(p.name for p in c.ports)
        text = res + (f"; ports {ports}" if ports else "") + (f"; runs {command}" if command
                                                              else "")
        out.append((f"Container {c.name}".strip(), text))
    return out


def stateless_job(out: Output, response: Any, pool_path: str) -> None:
    """`job stateless get`: the job in a dozen lines."""
    if response.HasField("summary") and not response.HasField("job_info"):
        s = response.summary
        out.fields([("Job", f"{s.job_id.value} ({s.name})"),
                    ("State", views.enum_label(s.status, "state")),
                    ("Pods", f"{s.instance_count}: {_stats(s.status.pod_stats)}"),
                    ("Version", s.status.version.value),
                    ("Workflow", workflow_line(s.status.workflow_status))])
        return
    info = response.job_info
    spec, status = info.spec, info.status
    state = views.enum_label(status, "state")
    goal = views.enum_label(status, "desired_state")
    labels = ", ".join(f"{lb.key}={lb.value}" for lb in spec.labels)
    out.fields([
        ("Job", f"{info.job_id.value} ({spec.name})"),
        ("Owner", spec.owner or spec.owning_team),
        ("State", state + (f" (goal {goal})" if goal and goal != state else "")),
        ("Pool", pool_path),
        ("Pods", f"{spec.instance_count}: {_stats(status.pod_stats)}"),
        ("Version", status.version.value),
        ("Workflow", workflow_line(status.workflow_status)),
        ("Created", views.when(status.creation_time)),
        ("Labels", labels),
        *container_lines(spec),
    ])


def workflows(out: Output, infos: Any) -> None:
    """`job stateless workflows`: newest first, one row each."""
    rows = []
    for i, info in enumerate(infos):
        st = info.status
        rows.append([i, views.enum_label(st, "type"), views.enum_label(st, "state"),
                     st.num_instances_completed, st.num_instances_failed,
                     st.num_instances_remaining,
                     f"{st.prev_version.value or '-'} > {st.version.value}",
                     views.when(st.creation_time), views.when(st.completion_time)])
    out.table(WORKFLOWS, rows, empty="No workflow for this job.")


def pools(out: Output, status: capacity_pb2.ListPoolStatusResponse) -> None:
    """`respool dump`: the tree with what each pool may use, holds and waits for."""
    rows = []
    notes = []
    for p in status.pools:
        depth = max(0, p.path.count("/") - (0 if p.path != "/" else 1))
        name = ("  " * max(0, depth - 1)) + (p.path if depth <= 1 else p.path.rsplit("/", 1)[1])
        rows.append([name, _short(p.reservation), _short(p.limit), _short(p.entitlement),
                     _short(p.allocation), _short(p.demand),
                     f"{p.queued_tasks}" if p.leaf and p.path != "/" else ""])
        if p.limit_above_capacity:
            notes.append(f"{p.path}: its {', '.join(p.limit_above_capacity)} limit is above the "
                         "cluster's capacity")
        if p.reserved_for:
            notes.append(f"{p.path}: {p.reserved_for} holds a backfill reservation")
    out.table(POOLS, rows, empty="No pools.")
    out.wrapped(f"Cluster capacity: {amounts(status.cluster_capacity)}"
             + (f", slack {words.number(status.slack_cpu)} cpu" if status.slack_cpu else ""))
    for note in notes:
        out.wrapped(f"Note: {note}")


def _short(a: Any) -> str:
    """'2 cpu/4 GiB' (cpu and memory; gpu when any)."""
    text = f"{words.number(a.cpu)} cpu/{words.size_mb(a.mem_mb)}"
    return text + (f"/{words.number(a.gpu)} gpu" if a.gpu else "")


def watch_event(out: Output, response: Any) -> None:
    """One watch event as a line per changed job or pod."""
    for job in response.stateless_jobs:
        st = job.status
        out.line(f"job {views.short(job.job_id.value)} {job.name}: "
                 f"{views.enum_label(st, 'state')}, pods {_stats(st.pod_stats)}"
                 + (f"; {workflow_line(st.workflow_status)}"
                    if workflow_line(st.workflow_status) else ""))
    for job_id in response.stateless_jobs_not_found:
        out.line(f"job {views.short(job_id.value)}: not found")
    for pod in response.pods:
        st = pod.status
        why = st.message or st.reason
        out.line(f"pod {views.short(pod.pod_name.value)}: {views.enum_label(st, 'state')}"
                 + (f" on {st.host}" if st.host else "") + (f": {why}" if why else ""))
    for name in response.pods_not_found:
        out.line(f"pod {views.short(name.value)}: not found")
