"""Who may do what: roles made of accept/reject rules plus resource scopes, and the principal.

Rules are Peloton's BASIC-auth rules (`pkg/auth/impl/basic`), read the same
way: `*` matches everything; `<service>:<method>` matches one method, where
the method may be `*` or end in `*` (a prefix).  A call is permitted when some
accept rule matches it and no reject rule does.

One extension, for the Aurora endpoint: further parts name the job, as
Aurora's Shiro permissions do
(`thrift.AuroraSchedulerManager:createJob:<role>:<environment>:<name>`).
As in Shiro, a rule with fewer parts implies every deeper part
(`thrift.AuroraSchedulerManager:*:www` covers every job of role www), and a
rule with more parts than a permission matches it only if the extra parts
are `*`.

Beyond the originals, a role scopes what its methods may touch:
* `pools`: resource pool paths its users may create jobs in (`*` all; an exact
  path, or a prefix ending in `*`, e.g. `/team/*`);
* `owners`: jobs its users may change, by job owner (`self` = the caller's own
  jobs, a name, a prefix ending in `*`, or `*` for all);
* `task_users`: Unix users the jobs it creates may run as (names, prefixes, `*`);
  a job naming no user always may (it runs as an unprivileged per-task user).
A root role (accept exactly `*`, no reject) has every scope.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from peloton.core.errors import InvalidArgument

MATCH_ALL = "*"
_SERVICE = re.compile(r"^[A-Za-z0-9.]+$")
_METHOD = re.compile(r"^(?:\*|[A-Za-z]+\*?)$")
_SCOPE = re.compile(r"^(?:\*|[A-Za-z0-9_.\-/]+\*?)$")


@dataclass(frozen=True, slots=True)
class Rule:
    """One accept or reject rule, split into its parts."""

    parts: tuple[str, ...]

    @staticmethod
    def parse(text: str, field_name: str = "rule") -> Rule:
        """A rule from its text; InvalidArgument naming `field_name` when malformed."""
        if text == MATCH_ALL:
            return Rule((MATCH_ALL,))
        parts = tuple(text.split(":"))
        ok = (2 <= len(parts) <= 5 and bool(_SERVICE.match(parts[0]))
              and bool(_METHOD.match(parts[1]))
              and all(_SCOPE.match(p) for p in parts[2:]))
        if not ok:
            raise InvalidArgument(
                f"{field_name}: rule {text!r} has unexpected format (expected '*', "
                "'<service>:<method>' with the method '*' or ending in '*', or, for Aurora, "
                "'<service>:<method>:<role>[:<environment>[:<name>]]')", field=field_name)
        return Rule(parts)

    def matches(self, permission: Sequence[str]) -> bool:
        """Whether this rule covers `permission` (its parts: service, method[, role])."""
        if self.parts == (MATCH_ALL,):
            return True
        for i, part in enumerate(self.parts):
            if i >= len(permission):
                if part != MATCH_ALL:
                    return False
                continue
            if not match_part(permission[i], part):
                return False
        return True

    def __str__(self) -> str:
        return ":".join(self.parts)


def match_part(value: str, pattern: str) -> bool:
    """`*`, an exact value, or a prefix ending in `*` (Peloton's matchRule)."""
    if not pattern:
        return False
    if pattern == MATCH_ALL:
        return True
    if pattern.endswith(MATCH_ALL):
        return value.startswith(pattern[:-1])
    return value == pattern


def match_any(value: str, patterns: Sequence[str]) -> bool:
    """Whether some pattern (see `match_part`) covers `value`."""
    return any(match_part(value, p) for p in patterns)


@dataclass(frozen=True, slots=True)
class Role:
    """A named set of rules and scopes (see the module docstring)."""

    name: str
    accept: tuple[Rule, ...] = ()
    reject: tuple[Rule, ...] = ()
    pools: tuple[str, ...] = (MATCH_ALL,)
    owners: tuple[str, ...] = ("self",)
    task_users: tuple[str, ...] = ()

    @property
    def is_root(self) -> bool:
        """Accepts exactly `*` and rejects nothing (what Peloton requires of the internal user)."""
        return self.accept == (Rule((MATCH_ALL,)),) and not self.reject

    def permits(self, permission: Sequence[str]) -> bool:
        """Some accept rule matches and no reject rule does."""
        return (any(r.matches(permission) for r in self.accept)
                and not any(r.matches(permission) for r in self.reject))


#: The role of everyone when authentication is off.
OPEN_ROLE = Role("open", accept=(Rule((MATCH_ALL,)),))


@dataclass(frozen=True, slots=True)
class Principal:
    """An authenticated caller: a user name ("" for the default user) and its role."""

    name: str
    role: Role
    #: How it proved who it is: "password", "token", "certificate", "default", "open", or
    #: "forwarded" (named by an internal peer relaying its call: authenticator.py).
    method: str = "password"
    internal: bool = False
    extra: dict[str, str] = field(default_factory=dict, compare=False)

    @property
    def display(self) -> str:
        """The name in messages and the audit log."""
        return self.name or "(default user)"

    def permits(self, permission: Sequence[str]) -> bool:
        """The role permits `permission`."""
        return self.role.permits(permission)

    def may_use_pool(self, path: str) -> bool:
        """May create jobs in the pool at `path`."""
        return self.role.is_root or _covers_path(path, self.role.pools)

    def may_change_job_of(self, owner: str) -> bool:
        """May stop, update or delete a job whose owner is `owner`."""
        if self.role.is_root or MATCH_ALL in self.role.owners:
            return True
        if "self" in self.role.owners and self.name and owner == self.name:
            return True
        return bool(owner) and match_any(owner, [o for o in self.role.owners if o != "self"])

    def may_own(self, owner: str) -> bool:
        """May create a job owned by `owner` (itself, or an owner its role covers)."""
        return self.may_change_job_of(owner)

    def may_run_as(self, user: str) -> bool:
        """May create a job whose tasks run as Unix user `user` ("" = the per-task user)."""
        return not user or self.role.is_root or match_any(user, self.role.task_users)


def _covers_path(path: str, patterns: Sequence[str]) -> bool:
    norm = "/" + path.strip("/")
    for pattern in patterns:
        if pattern == MATCH_ALL:
            return True
        if pattern.endswith(MATCH_ALL):
            if norm.startswith(pattern[:-1]) or norm + "/" == pattern[:-1]:
                return True
        elif norm == "/" + pattern.strip("/"):
            return True
    return False
