"""Resource-level authorization of the job APIs: pools, job owners and task users.

Installed on the job manager's server (AuthInterceptor.add_guard) for the
v0 JobManager, TaskManager and UpdateService, the v1alpha JobService and
PodService, and our CronService.  Reads pass (the method rules decide them),
except a task's sandbox (its logs and files: BrowseSandbox, BrowsePodSandbox),
which is held to the owner check of Stop and Restart.  A call that changes
something is checked against the caller's role (peloton/common/auth/policy.py):

* creating a job: the pool (`respoolID` / `respool_id`) must be one the role
  allows; the job's owner must be the caller or an owner the role covers (a
  job created with no owner is owned by its creator: the owner is filled in
  here); every task's Unix user (Mesos `CommandInfo.user`) must be one the role
  may run as;
* changing an existing job (by job id, pod name or update id): the role must
  cover the job's current owner; a new config is checked like a create (its
  pool, owner and users);
* cron jobs: scheduling one checks its template like a create (every run is a
  job created from it, by the job manager itself, so this is the only check its
  runs get); replacing, descheduling or starting one needs the role to cover
  the owner of the template stored under that name.

What a job's owner and pool are comes from `JobFacts` (the store, wired by
the composition root), so the check needs no help from the job manager.
A job that does not exist passes here: the servicer answers NOT_FOUND.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol

from google.protobuf.message import Message

from peloton.api.auth_grpc import mutating
from peloton.common.auth import Principal
from peloton.core.errors import PermissionDenied

JOB_SERVICES = ("peloton.api.v0.job.JobManager", "peloton.api.v0.task.TaskManager",
                "peloton.api.v0.update.svc.UpdateService",
                "peloton.api.v1alpha.job.stateless.svc.JobService",
                "peloton.api.v1alpha.pod.svc.PodService")
CRON_SERVICE = "pelotonpy.api.cron.CronService"
#: Service-name prefixes the guard is installed for (AuthInterceptor.add_guard).
GUARDED_PREFIXES = ("peloton.api.", "pelotonpy.api.cron.")
CREATES = frozenset({("peloton.api.v0.job.JobManager", "Create"),
                     ("peloton.api.v1alpha.job.stateless.svc.JobService", "CreateJob")})
#: Reads of what a task wrote (logs, files): only for whoever may change the job.
OWNER_READS = frozenset({("peloton.api.v0.task.TaskManager", "BrowseSandbox"),
                         ("peloton.api.v1alpha.pod.svc.PodService", "BrowsePodSandbox")})
#: Request fields that carry a (new) job configuration.
CONFIG_FIELDS = ("config", "jobConfig", "spec")
COMMAND_INFO = "mesos.v1.CommandInfo"


class JobFacts(Protocol):
    """What the guard must know about existing jobs and pools (read from the store)."""

    def job_owner_and_pool(self, job_id: str) -> tuple[str, str] | None:
        """(owner, pool id) of a job's newest config; None if there is no such job."""
        ...

    def job_of_update(self, update_id: str) -> str | None:
        """The job an update (workflow) belongs to; None if there is none."""
        ...

    def pool_path(self, pool_id: str) -> str | None:
        """The path of a pool ("/a/b"); None if there is none."""
        ...

    def cron_job_owner(self, name: str) -> str | None:
        """The owner of the template of the cron job `name`; None if there is none."""
        ...


class JobGuard:
    """The resource checks above, as an auth_grpc.ResourceGuard."""

    def __init__(self, facts: JobFacts) -> None:
        self.facts = facts

    def check(self, principal: Principal, service: str, method: str, request: Any) -> str:
        """Raise PermissionDenied naming what is denied; returns what the call touches."""
        if not isinstance(request, Message) or not (
                mutating(service, method) or (service, method) in OWNER_READS):
            return ""
        if service == CRON_SERVICE:
            return self._cron(principal, method, request)
        if service not in JOB_SERVICES:
            return ""
        config = _config(request)
        if (service, method) in CREATES:
            return self._new_config(principal, config, creating=True, method=method)
        job_id = self._job_id(request)
        target = f"job {job_id}" if job_id else ""
        if job_id:
            facts = self.facts.job_owner_and_pool(job_id)
            if facts is not None:
                owner = facts[0]
                if not principal.may_change_job_of(owner):
                    raise PermissionDenied(
                        f"{principal.display} may not {method} job {job_id}: it is owned by "
                        f"{owner or '(nobody)'}, which role {principal.role.name} does not cover")
        if config is not None:
            where = self._new_config(principal, config, creating=False, method=method)
            target = f"{target}, {where}" if where else target
        return target

    # -- pieces -------------------------------------------------------------------------------
    def _cron(self, principal: Principal, method: str, request: Message) -> str:
        job = getattr(request, "job", None)
        name = str(getattr(job if isinstance(job, Message) else request, "name", ""))
        target = f"cron job {name}" if name else ""
        owner = self.facts.cron_job_owner(name) if name else None
        if owner is not None and not principal.may_change_job_of(owner):
            raise PermissionDenied(
                f"{principal.display} may not {method} cron job {name}: it is owned by "
                f"{owner or '(nobody)'}, which role {principal.role.name} does not cover")
        if isinstance(job, Message):
            template = job.WhichOneof("template")
            if template:
                where = self._new_config(principal, getattr(job, template), creating=True,
                                         method=method)
                target = f"{target}, {where}" if where else target
        return target

    def _new_config(self, principal: Principal, config: Message | None, *, creating: bool,
                    method: str) -> str:
        if config is None:
            return ""
        owner_field = "owner" if _has(config, "owner") else ""
        owner = str(getattr(config, "owner", "")) if owner_field else ""
        if creating and not owner and principal.name:
            config.owner = principal.name  # type: ignore[attr-defined]
            owner = principal.name
        if owner and (creating or owner != principal.name) and not principal.may_own(owner):
            raise PermissionDenied(f"{principal.display} may not {method} a job owned by {owner}")
        where = ""
        pool_id = _pool_id(config)
        if pool_id:
            path = self.facts.pool_path(pool_id)
            if path is not None:
                where = f"pool {path}"
                if not principal.may_use_pool(path):
                    raise PermissionDenied(f"{principal.display} may not create jobs in resource "
                                           f"pool {path} (role {principal.role.name})")
        for user in sorted(set(_task_users(config))):
            if not principal.may_run_as(user):
                raise PermissionDenied(f"{principal.display} may not run tasks as Unix user "
                                       f"{user!r} (role {principal.role.name})")
        return where

    def _job_id(self, request: Message) -> str:
        for name in ("id", "jobId", "job_id"):
            if _has(request, name):
                value = str(getattr(request, name).value)
                if value:
                    return value
        if _has(request, "pod_name"):
            name = str(request.pod_name.value)  # type: ignore[attr-defined]
            return name.rpartition("-")[0] if "-" in name else name
        if _has(request, "updateId"):
            update_id = str(request.updateId.value)  # type: ignore[attr-defined]
            return (self.facts.job_of_update(update_id) or "") if update_id else ""
        return ""


def _has(message: Message, name: str) -> bool:
    return name in message.DESCRIPTOR.fields_by_name


def _config(request: Message) -> Message | None:
    for name in CONFIG_FIELDS:
        if _has(request, name) and request.HasField(name):
            value: Message = getattr(request, name)
            return value
    return None


def _pool_id(config: Message) -> str:
    for name in ("respoolID", "respool_id"):
        if _has(config, name) and config.HasField(name):
            return str(getattr(config, name).value)
    return ""


def _task_users(message: Message) -> Iterator[str]:
    """The `user` of every Mesos CommandInfo anywhere in `message`."""
    if message.DESCRIPTOR.full_name == COMMAND_INFO:
        user = str(getattr(message, "user", ""))
        if user:
            yield user
        return
    for field, value in message.ListFields():
        if field.message_type is None:
            continue
        if field.message_type.GetOptions().map_entry:
            for item in value.values():
                if isinstance(item, Message):
                    yield from _task_users(item)
        elif field.is_repeated:
            for item in value:
                yield from _task_users(item)
        else:
            yield from _task_users(value)
