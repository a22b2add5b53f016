"""What every `aurora` verb needs: clusters, scheduler calls, configs, and Aurora's messages.

Failures become CommandError with Aurora's exit codes: an unknown cluster or
a bad config 3 (`Error loading configuration: <file:line: field: message>`),
an unreachable scheduler 7, a refused caller 30, a scheduler error 10 (or
the code the verb chooses) printed as Aurora prints it: the verb's message,
then a tab and the scheduler's messages.
"""

from __future__ import annotations

from fnmatch import fnmatch
from typing import Any

import click

from aurorabridge.client import clusters, convert
from aurorabridge.client.config import JobConfig, get_config
from aurorabridge.client.errors import ConfigError
from aurorabridge.client.scheduler import (
    AuthFailed,
    SchedulerClient,
    SchedulerError,
    Unreachable,
    messages,
)
from aurorabridge.thrift_api import api
from cli.aurora.exit_codes import (
    EXIT_API_ERROR,
    EXIT_AUTH_ERROR,
    EXIT_INVALID_CONFIGURATION,
    EXIT_INVALID_PARAMETER,
    EXIT_NETWORK_ERROR,
    CommandError,
)
from cli.aurora.options import JobKey

JOB_UPDATING_ERROR_MSG = ("Error: job is locked by an active update.\n"
                          "      Run 'aurora update abort' or wait for the active update to finish.")


def out(message: str, indent: int = 0) -> None:
    """Print to stdout, each line indented."""
    for line in message.split("\n"):
        click.echo(" " * indent + line)


def err(message: str, indent: int = 0) -> None:
    """Print to stderr, each line indented."""
    for line in message.split("\n"):
        click.echo(" " * indent + line, err=True)


class AuroraContext:
    """Per-invocation state: the clusters and one scheduler client per cluster."""

    def __init__(self) -> None:
        self._clusters: dict[str, clusters.Cluster] | None = None
        self._apis: dict[str, SchedulerClient] = {}

    @property
    def clusters(self) -> dict[str, clusters.Cluster]:
        """The clusters of clusters.json."""
        if self._clusters is None:
            try:
                self._clusters = clusters.load()
            except clusters.ClustersError as exc:
                raise CommandError(EXIT_INVALID_CONFIGURATION, str(exc)) from None
        return self._clusters

    def api(self, cluster: str) -> SchedulerClient:
        """The scheduler client of `cluster` (exit 3 when clusters.json does not name it)."""
        if cluster not in self.clusters:
            known = ", ".join(sorted(self.clusters)) or "none; see clusters.json"
            raise CommandError(EXIT_INVALID_CONFIGURATION, f"Unknown cluster: {cluster} (known: {known})")
        if cluster not in self._apis:
            self._apis[cluster] = SchedulerClient(self.clusters[cluster])
        return self._apis[cluster]

    def call(self, cluster: str, method: str, *args: Any) -> Any:
        """Call `method` on `cluster`'s scheduler; its Response."""
        try:
            return self.api(cluster).call(method, *args)
        except Unreachable as exc:
            raise CommandError(EXIT_NETWORK_ERROR, str(exc)) from None
        except AuthFailed as exc:
            raise CommandError(EXIT_AUTH_ERROR, f"Error authenticating: {exc}") from None
        except SchedulerError as exc:
            raise CommandError(EXIT_API_ERROR, str(exc)) from None

    def check(self, resp: Any, err_code: int = EXIT_API_ERROR, err_msg: str = "Command failure:") -> Any:
        """Aurora's log_response_and_raise: `resp` if OK, else print the failure and exit."""
        if resp.responseCode == api.ResponseCode.OK:
            return resp
        lines = [err_msg, f"\t{messages(resp)}"]
        if resp.responseCode == api.ResponseCode.JOB_UPDATING_ERROR:
            lines.append(f"\t{JOB_UPDATING_ERROR_MSG}")
        raise CommandError(err_code, "\n".join(lines))

    def job_page(self, key: JobKey, update_id: str | None = None) -> str:
        """The scheduler's web page of a job (or of one of its updates)."""
        cluster = self.clusters[key.cluster]
        base = (cluster.proxy_url or self.api(key.cluster).url).rstrip("/")
        url = f"{base}/scheduler/{key.role}/{key.env}/{key.name}"
        return f"{url}/update/{update_id}" if update_id else url

    def get_job_config(self, key: JobKey, path: str, bindings: tuple[dict[Any, str], ...] = (),
                       read_json: bool = False) -> JobConfig:
        """The job `key` of config `path`, with the tier backfilled from the scheduler."""
        try:
            config = get_config(path, key.name, list(bindings), key.cluster, key.role, key.env,
                                read_json=read_json)
        except ConfigError as exc:
            raise CommandError(EXIT_INVALID_CONFIGURATION, f"Error loading configuration: {exc}") from None
        resp = self.check(self.call(key.cluster, "getTierConfigs"),
                          err_msg="Error getting tier configurations.")
        config.update_job(convert.backfill_tier(config.raw(), resp.result.getTierConfigResult))
        return config

    def get_job_config_optional(self, key: JobKey, path: str | None, bindings: tuple[dict[Any, str], ...]
                                = (), read_json: bool = False) -> JobConfig | None:
        """As get_job_config when a path is given."""
        return self.get_job_config(key, path, bindings, read_json) if path else None

    def query(self, key: JobKey, statuses: Any = None, instances: Any = None) -> list[Any]:
        """getTasksWithoutConfigs of a job (exit 6 on an error answer)."""
        query = api.TaskQuery(jobKeys=[key.to_thrift()], statuses=statuses,
                              instanceIds=set(instances) if instances else None)
        resp = self.check(self.call(key.cluster, "getTasksWithoutConfigs", query),
                          err_code=EXIT_INVALID_PARAMETER)
        return list(resp.result.scheduleStatusResult.tasks or [])

    def active_tasks(self, key: JobKey) -> list[Any]:
        """The job's tasks in an active state."""
        return self.query(key, statuses=set(api.ACTIVE_STATES))

    def active_instances_or_raise(self, key: JobKey, instances: list[int]) -> set[int]:
        """The active instances; exit 6 when one of `instances` is not among them."""
        active = {t.assignedTask.instanceId for t in self.active_tasks(key)}
        unknown = sorted(set(instances) - active)
        if unknown:
            raise CommandError(EXIT_INVALID_PARAMETER, f"Invalid instance parameter: {unknown}")
        return active

    def has_count_or_percentage_sla_policy(self, key: JobKey) -> bool:
        """Whether an active task has a count or percentage SLA policy."""
        query = api.TaskQuery(jobKeys=[key.to_thrift()], statuses=set(api.ACTIVE_STATES))
        resp = self.check(self.call(key.cluster, "getTasksStatus", query), err_code=EXIT_INVALID_PARAMETER)
        for task in resp.result.scheduleStatusResult.tasks or []:
            policy = task.assignedTask.task.slaPolicy
            if policy is not None and (policy.percentageSlaPolicy or policy.countSlaPolicy):
                return True
        return False

    def jobs_matching(self, pattern: tuple[str, str, str, str]) -> list[JobKey]:
        """Jobs matching a key with `*` wildcards (a fully given key is returned as it is)."""
        cluster, role, env, name = pattern
        if not any("*" in part for part in pattern):
            return [JobKey(cluster, role, env, name)]
        found = []
        for each in (sorted(self.clusters) if cluster == "*" else [cluster]):
            resp = self.check(self.call(each, "getJobs", None if "*" in role else role),
                              err_code=4)
            for config in resp.result.getJobsResult.configs or []:
                key = JobKey.from_thrift(each, config.key)
                if fnmatch(key.role, role) and fnmatch(key.env, env) and fnmatch(key.name, name):
                    found.append(key)
        return sorted(set(found))
