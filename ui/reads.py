"""What the UI pages show, read through the typed client and flattened by `render`.

Each method is one page's worth of data and costs a handful of RPCs, so a
page polling every few seconds stays cheap.  Failures are the client's
`PelotonError`s, raised unchanged; the HTTP layer maps them once.

Filters arrive as query-string values and are checked here (unknown
state names are InvalidArgument naming the field); the server does the
filtering itself (v0 JobManager.Query: states, exact owner, name
substring, pool path), so paging stays right.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from peloton.api.client import PelotonClient
from peloton.api.gen.peloton.api.v0.host import host_pb2
from peloton.api.gen.peloton.api.v0.job import job_pb2
from peloton.api.gen.peloton.api.v0.query import query_pb2
from peloton.core.errors import InvalidArgument, NotFound, PelotonError
from ui import render
from ui.render import Json

#: Jobs listed when the page does not say; the server caps every page at 5,000.
DEFAULT_JOB_LIMIT = 200
MAX_JOB_LIMIT = 5000
#: Workflows shown in a job's history, newest first.
WORKFLOW_HISTORY = 20
POD_EVENTS = 100
LOG_FILES = ("stdout", "stderr")
DEFAULT_LOG_BYTES = 64 * 1024
MAX_LOG_BYTES = 4 * 1024 * 1024


def _names(raw: str, known: Sequence[str], field: str, prefix: str = "") -> list[str]:
    """Comma-separated state names, upper-cased and checked against `known`."""
    out = []
    for word in (w.strip().upper() for w in raw.split(",")):
        if not word:
            continue
        name = word if word.startswith(prefix) else prefix + word
        if name not in known:
            choices = ", ".join(k.removeprefix(prefix) for k in known)
            raise InvalidArgument(f"{field}: unknown state {word!r} (use {choices})", field=field)
        out.append(name)
    return out


def _int(raw: str, field: str, default: int, low: int, high: int) -> int:
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise InvalidArgument(f"{field}: expected a whole number, got {raw!r}", field=field) from None
    if not low <= value <= high:
        raise InvalidArgument(f"{field}: must be within {low}..{high}, got {value}", field=field)
    return value


class Reads:
    """The read side of the JSON API over one client."""

    def __init__(self, client: PelotonClient) -> None:
        self.client = client

    # -- cluster -------------------------------------------------------------------------------
    def overview(self) -> Json:
        """Hosts by state, pools with their usage, jobs and tasks by state."""
        hosts = [render.host(h) for h in self.client.query_hosts().host_infos]
        pools = self._pools()
        spec = job_pb2.QuerySpec(pagination=query_pb2.PaginationSpec(limit=MAX_JOB_LIMIT))
        found = self.client.query_jobs(spec)
        jobs = [render.job_summary(s, {}) for s in found.results]
        tasks: dict[str, int] = {}
        for job in jobs:
            render.add_counts(tasks, job["task_states"])
        root = next((p for p in pools if p["path"] == "/"), None)
        top = [p for p in pools if p["depth"] == 1]
        return {
            "hosts": {"total": len(hosts), "by_state": render.count_by(h["state"] for h in hosts)},
            "jobs": {"total": found.pagination.total or len(jobs), "counted": len(jobs),
                     "by_state": render.count_by(j["state"] for j in jobs)},
            "tasks": {"by_state": tasks},
            "allocation": root["allocation"] if root else dict.fromkeys(render.KINDS, 0.0),
            "reservation": {k: sum(p["reservation"][k] for p in top) for k in render.KINDS},
            "limit": {k: sum(p["limit"][k] for p in top) for k in render.KINDS},
            "pools": pools,
        }

    def pools(self) -> Json:
        """Every pool, parents before children."""
        return {"pools": self._pools()}

    def hosts(self, query: Mapping[str, str]) -> Json:
        """Hosts, optionally only those in the states of `?state=UP,DRAINING`."""
        states = _names(query.get("state", ""), list(host_pb2.HostState.keys()), "state", "HOST_STATE_")
        hosts = [render.host(h) for h in self.client.query_hosts(states).host_infos]
        hosts.sort(key=lambda h: h["hostname"])
        return {"hosts": hosts, "by_state": render.count_by(h["state"] for h in hosts)}

    # -- jobs ----------------------------------------------------------------------------------
    def jobs(self, query: Mapping[str, str]) -> Json:
        """Jobs matching `?state=&name=&owner=&pool=&limit=`, newest first."""
        spec = job_pb2.QuerySpec(
            jobStates=_names(query.get("state", ""), list(job_pb2.JobState.keys()), "state"),
            name=query.get("name", "").strip(), owner=query.get("owner", "").strip(),
            pagination=query_pb2.PaginationSpec(
                limit=_int(query.get("limit", ""), "limit", DEFAULT_JOB_LIMIT, 1, MAX_JOB_LIMIT)))
        pool = query.get("pool", "").strip()
        if pool:
            spec.respool.value = pool
        found = self.client.query_jobs(spec)
        paths = {p["id"]: p["path"] for p in self._pools()}
        jobs = [render.job_summary(s, paths) for s in found.results]
        return {"jobs": jobs, "total": found.pagination.total or len(jobs)}

    def job(self, job_id: str) -> Json:
        """A job's config summary, status, tasks, current workflow and workflow history."""
        info = self.client.get_job(job_id).jobInfo
        runtime = render.job_runtime(info.runtime)
        tasks = [render.task(t) for t in self.client.list_tasks(job_id).result.value.values()]
        tasks.sort(key=lambda t: int(t["instance"]))
        workflows = [render.workflow(w) for w in self.client.list_job_workflows(
            job_id, updates_limit=WORKFLOW_HISTORY).workflow_infos]
        current = None
        if runtime["update_id"] and workflows:
            # The newest workflow is the job's current one (runtime.updateID names it).
            current = {**workflows[0], "update_id": runtime["update_id"]}
        config = render.job_config(info.config, self._pool_path(info.config.respoolID.value))
        return {"job": {"id": job_id, **config}, "runtime": runtime, "tasks": tasks,
                "workflow": current, "workflows": workflows}

    def task(self, job_id: str, instance: int, query: Mapping[str, str]) -> Json:
        """One instance: its current run, its pod events and the tail of its logs."""
        log_bytes = _int(query.get("log_bytes", ""), "log_bytes", DEFAULT_LOG_BYTES, 1, MAX_LOG_BYTES)
        info = self.client.get_task(job_id, instance).result
        events = self.client.get_pod_events(job_id, instance, limit=POD_EVENTS).result
        return {"job_id": job_id, "task": render.task(info),
                "events": [render.pod_event(e) for e in events],
                "logs": {name: self._log(job_id, instance, name, log_bytes) for name in LOG_FILES}}

    # -- helpers -------------------------------------------------------------------------------
    def _pools(self) -> list[Json]:
        pools = [render.pool(p) for p in self.client.query_respools().resourcePools]
        pools.sort(key=lambda p: [part for part in p["path"].split("/") if part])
        return pools

    def _pool_path(self, pool_id: str) -> str:
        if not pool_id:
            return ""
        try:
            return str(self.client.get_respool(pool_id).poolinfo.path.value) or pool_id
        except NotFound:  # the pool was deleted after the job finished
            return pool_id

    def _log(self, job_id: str, instance: int, name: str, max_bytes: int) -> Json:
        # A task not placed yet has no sandbox: say so in place of the text, not as a page error.
        try:
            tail = self.client.tail_task_file(job_id, instance, name, max_bytes=max_bytes)
        except PelotonError as exc:
            return {"error": exc.kind, "message": exc.message}
        return {"text": tail.data.decode("utf-8", errors="replace"), "size": tail.size,
                "truncated": tail.size > len(tail.data)}

