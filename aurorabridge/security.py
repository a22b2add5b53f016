"""Who may call the Aurora endpoint: HTTP Basic onto Peloton's users, Aurora's permissions.

Authentication: the `Authorization: Basic` header (gorealis' BasicAuth
option, the Aurora client with credentials in ~/.netrc, curl -u), or a
Peloton login token as `Authorization: Bearer`, against the same users file
as the gRPC API (peloton/common/auth).  No header: the default user.

Authorization uses Aurora's Shiro permission strings
(`Permissions.java`) as rules in the roles' `accept` / `reject` lists:

* AuroraSchedulerManager methods are job-scoped:
  `thrift.AuroraSchedulerManager:<method>:<role>:<environment>:<name>`,
  the job taken from the call's arguments as Aurora's
  ShiroAuthorizingParamInterceptor does (JobKey, JobConfiguration.key,
  JobUpdateRequest.taskConfig.job, JobUpdateKey.job, InstanceKey.jobKey);
  jobs are also created only in a pool the role allows (the bridge's pool);
* AuroraAdmin methods: `thrift.AuroraAdmin:<method>`;
* reads: `thrift.ReadOnlyScheduler:<method>` (Aurora lets anyone read; grant
  the default user `thrift.ReadOnlyScheduler:*` for that).

A refused call answers a Response with AUTH_FAILED and Aurora's wording
("Subject alice is not permitted to ..."), never an HTTP error (Aurora
clients retry those for minutes).  Every call that may change something is
written to the audit log with its outcome, and every refused call (reads
too) with who, the method and the job (`role/env/name`) or pool it named.
"""

from __future__ import annotations

from typing import Any

from aurorabridge.thrift_api import MANAGER_METHODS, READ_ONLY_METHODS
from peloton.common.auth import Credentials, Principal, Security
from peloton.common.auth.audit import who_of
from peloton.core.errors import PermissionDenied, Unauthenticated

READ_DOMAIN = "thrift.ReadOnlyScheduler"
MANAGER_DOMAIN = "thrift.AuroraSchedulerManager"
ADMIN_DOMAIN = "thrift.AuroraAdmin"
#: Methods that create or grow a job (the role must be allowed the bridge's pool).
CREATING = frozenset({"createJob", "startJobUpdate", "addInstances", "scheduleCronJob",
                      "replaceCronTemplate"})


def job_key_of(args: Any) -> Any:
    """The JobKey a manager method acts on, from its arguments (None if there is none)."""
    for name in ("job", "description", "config", "request", "key"):
        value = getattr(args, name, None)
        if value is None:
            continue
        if hasattr(value, "role") and hasattr(value, "environment"):  # a JobKey
            return value
        for attr in ("key", "job", "jobKey"):  # JobConfiguration, JobUpdateKey, InstanceKey
            inner = getattr(value, attr, None)
            if inner is not None and hasattr(inner, "role"):
                return inner
        task = getattr(value, "taskConfig", None)  # JobUpdateRequest
        if task is not None and getattr(task, "job", None) is not None:
            return task.job
    return None


def permission_for(method: str, args: Any) -> tuple[str, ...] | None:
    """The permission a call needs (None: a manager call whose job cannot be told)."""
    if method in READ_ONLY_METHODS:
        return (READ_DOMAIN, method)
    if method in MANAGER_METHODS:
        key = job_key_of(args)
        if key is None or not key.role or not key.environment or not key.name:
            return None
        return (MANAGER_DOMAIN, method, str(key.role), str(key.environment), str(key.name))
    return (ADMIN_DOMAIN, method)


class BridgeSecurity:
    """Authenticates and authorizes the bridge's calls (see the module docstring)."""

    def __init__(self, security: Security, pools: tuple[str, ...] = ()) -> None:
        self.security = security
        self.pools = pools

    @property
    def enabled(self) -> bool:
        """Whether callers must be authorized (else everything is allowed)."""
        return self.security.enabled

    def authenticate(self, authorization: str) -> Principal:
        """The caller of one HTTP request; Unauthenticated for bad credentials."""
        creds = Credentials().with_authorization(authorization) if authorization else Credentials()
        return self.security.authenticator.authenticate(creds)

    def authorize(self, principal: Principal, method: str, args: Any) -> str:
        """Raise PermissionDenied (Aurora's wording) unless `principal` may make this call;
        returns the audit target."""
        if not self.enabled:
            return ""
        permission = permission_for(method, args)
        if permission is None:
            raise PermissionDenied("Missing or invalid job key from request.")
        if not principal.permits(permission):
            raise PermissionDenied(f"Subject {principal.display} is not permitted to "
                                   f"{':'.join(permission)}.")
        if method in CREATING:
            for path in self.pools:
                if not principal.may_use_pool(path):
                    raise PermissionDenied(f"Subject {principal.display} may not create jobs in "
                                           f"resource pool {path}.")
        return self.target_of(method, args)

    def audit(self, principal: Principal | None, method: str, target: str, result: str, *,
              refused: bool = False) -> None:
        """Record a call that may change something, or any refused call (allowed reads are not
        recorded); `principal` None: authentication failed."""
        if not self.enabled or (method in READ_ONLY_METHODS and not refused):
            return
        how = principal.method if principal is not None else ""
        self.security.audit.record(who=who_of(principal), how=how, front="aurora", what=method,
                                   target=target, result=result)

    def target_of(self, method: str, args: Any) -> str:
        """What a call names, for the audit log: its job (`job role/env/name`, and the pool
        for calls that create), hosts, or role ("" if none can be told)."""
        key = job_key_of(args)
        if key is not None and getattr(key, "role", None):
            job = "job " + "/".join(str(getattr(key, f, "") or "") for f in
                                    ("role", "environment", "name"))
            pools = ", ".join(f"pool {p}" for p in self.pools) if method in CREATING else ""
            return f"{job}, {pools}" if pools else job
        hosts = getattr(getattr(args, "hosts", None), "hostNames", None)
        if hosts:
            return "host " + ",".join(sorted(str(h) for h in hosts)[:10])
        for name in ("ownerRole", "role"):
            role = getattr(args, name, None)
            if isinstance(role, str) and role:
                return f"role {role}"
        return ""

    @staticmethod
    def refusal(exc: Unauthenticated | PermissionDenied) -> str:
        """The audit result of a refusal."""
        return f"AUTH_FAILED: {exc.message}"
