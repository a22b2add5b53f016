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
from peloton.api.client_forecast import CALL_GRACE
from peloton.api.explain import explain_job
from peloton.api.gen.peloton.api.v0.host import host_pb2
from peloton.api.gen.peloton.api.v0.job import job_pb2
from peloton.api.gen.peloton.api.v0.query import query_pb2
from peloton.api.gen.pelotonpy.ext import capacity_pb2
from peloton.core.errors import InvalidArgument, NotFound, PelotonError, Unimplemented
from peloton.core.forecast import render as forecast_render
from peloton.core.model.ids import validate_uuid
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
#: Wall seconds a page's forecast may take unless configured (`peloton ui --forecast-wall`,
#: `peloton up --ui-forecast-wall`): the service's default (what the CLI asks for).  At 5 s a
#: two-core machine spent it all on the estimate and tried none of the changes that would
#: start the task sooner.
FORECAST_WALL_S = 10.0
#: Seconds a page waits for an answer beyond the forecast call's own timeout.
PAGE_SLACK_S = 5.0


def page_timeout_secs(forecast_wall: float) -> float:
    """How long a page waits for any answer of the JSON API (static/js/api.js, told by the
    page's `peloton-api-timeout-ms`): the slowest is a forecast, whose call may take its wall
    time plus CALL_GRACE (the worker's start), so the page waits that and `PAGE_SLACK_S`
    more and the server's answer, even a refusal, comes first (30 s at the default 10 s)."""
    return forecast_wall + CALL_GRACE + PAGE_SLACK_S


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


def _job_id(raw: str) -> str:
    """A job id as the pages send it: a UUID (a bad one is refused here, before any RPC, so a
    page with a mistyped id can say so at once and stop asking)."""
    try:
        return validate_uuid(raw.strip(), "job_id")
    except InvalidArgument:
        raise InvalidArgument(f"{raw!r} is not a job id (a UUID such as "
                              "358fad26-73fa-43c8-a350-1e9067571a76)", field="job_id") from None


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
    """The read side of the JSON API over one client; a forecast may spend `forecast_wall`
    seconds of wall time."""

    def __init__(self, client: PelotonClient, forecast_wall: float = FORECAST_WALL_S) -> None:
        self.client = client
        self.forecast_wall = forecast_wall

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
        capacity = self._host_capacity()
        cluster = None if capacity is None else {
            "total": render.amounts(capacity.cluster_total),
            "allocated": render.amounts(capacity.cluster_allocated),
            "hosts_up": sum(1 for h in capacity.hosts if h.state == "UP" and h.connected)}
        return {
            "cluster": cluster,
            "over_capacity": [{"path": p["path"], "kinds": p["live"]["limit_above_capacity"]}
                              for p in top if p.get("live") and p["live"]["limit_above_capacity"]],
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
        capacity = self._host_capacity()
        caps = {c.hostname: c for c in capacity.hosts} if capacity is not None else {}
        for host in hosts:
            cap = caps.get(host["hostname"])
            host["capacity"] = render.host_capacity(cap) if cap is not None else None
        cluster = None if capacity is None else {
            "total": render.amounts(capacity.cluster_total),
            "allocated": render.amounts(capacity.cluster_allocated)}
        return {"hosts": hosts, "by_state": render.count_by(h["state"] for h in hosts),
                "cluster": cluster}

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
        """A job's config summary, status, tasks, current workflow, workflow history, and the
        story of why its waiting tasks wait (`explain`)."""
        job_id = _job_id(job_id)
        info = self.client.get_job(job_id).jobInfo
        runtime = render.job_runtime(info.runtime)
        listed = self.client.list_tasks(job_id).result.value
        tasks = [render.task(t) for t in listed.values()]
        tasks.sort(key=lambda t: int(t["instance"]))
        story = explain_job(self.client, job_id, info=info, tasks=listed).as_dict()
        workflows = [render.workflow(w) for w in self.client.list_job_workflows(
            job_id, updates_limit=WORKFLOW_HISTORY).workflow_infos]
        current = None
        if runtime["update_id"] and workflows:
            # The newest workflow is the job's current one (runtime.updateID names it).
            current = {**workflows[0], "update_id": runtime["update_id"]}
        config = render.job_config(info.config, self._pool_path(info.config.respoolID.value))
        return {"job": {"id": job_id, **config}, "runtime": runtime, "tasks": tasks,
                "workflow": current, "workflows": workflows, "explain": story}

    def explain(self, job_id: str) -> Json:
        """Why a job's tasks wait: pool entitlement and queue, cluster capacity, reasons."""
        return explain_job(self.client, _job_id(job_id)).as_dict()

    def forecast(self, job_id: str, query: Mapping[str, str]) -> Json:
        """When the job's pending tasks (or `?instance=`) start, what binds them, what would
        start them sooner (ForecastService, within `forecast_wall`), and as text."""
        raw = query.get("instance", "")
        instances = () if raw == "" else (_int(raw, "instance", 0, 0, 2**32 - 1),)
        got = self.client.forecast(_job_id(job_id), instances, wall_secs=self.forecast_wall)
        return {**forecast_render.to_json(got), "text": forecast_render.text(got)}

    def task(self, job_id: str, instance: int, query: Mapping[str, str]) -> Json:
        """One instance: its current run, its pod events and the tail of its logs."""
        log_bytes = _int(query.get("log_bytes", ""), "log_bytes", DEFAULT_LOG_BYTES, 1, MAX_LOG_BYTES)
        job_id = _job_id(job_id)
        job_name = self.client.get_job(job_id).jobInfo.config.name
        info = self.client.get_task(job_id, instance).result
        events = self.client.get_pod_events(job_id, instance, limit=POD_EVENTS).result
        return {"job_id": job_id, "job_name": job_name, "task": render.task(info),
                "events": [render.pod_event(e) for e in events],
                "logs": {name: self._log(job_id, instance, name, log_bytes) for name in LOG_FILES}}

    # -- helpers -------------------------------------------------------------------------------
    def _pools(self) -> list[Json]:
        pools = [render.pool(p) for p in self.client.query_respools().resourcePools]
        pools.sort(key=lambda p: [part for part in p["path"].split("/") if part])
        try:
            live = {s.pool_id: render.pool_status(s) for s in self.client.list_pool_status().pools}
        except Unimplemented:  # a cluster without our capacity extension
            live = {}
        for pool in pools:
            pool["live"] = live.get(pool["id"])
        return pools

    def _host_capacity(self) -> capacity_pb2.ListHostCapacityResponse | None:
        try:
            return self.client.list_host_capacity()
        except Unimplemented:
            return None

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

