"""Which Unix identity a task runs as: the job's user, or an unprivileged per-task user.

What a Kubernetes or Aurora user expects: a task runs as the user its job
names (Peloton's `command.user`, Mesos `CommandInfo.user`; the Aurora bridge
names the job's role), never as root unless the agent allows it.

* A job naming an account that exists on this host runs as it: its uid, its
  primary gid and the groups `getgrouplist` gives it (so not the agent's).
  Refused (the task fails with a message saying why): root unless the agent
  runs with `--allow-root-tasks`; system accounts (uid below 1000, other than
  `nobody`) unless listed with `--task-users`.
* A job naming no user, or a user this host does not have, runs as a
  *dynamic* user: a uid (and gid) of its own from `--dynamic-uids`
  (default 70000-79999), not in /etc/passwd and not used by any live run on
  this machine - of this agent or of any other (uidpool.py says how one is
  picked, uidlocks.py how it is held) - with no supplementary groups, HOME set
  to its sandbox, as systemd's DynamicUser.  Two tasks therefore never share an
  identity unless they run as the same named user.
* An agent that is not root cannot switch users: tasks run as the agent's
  own user (a job naming another user fails), and the agent says so.

The chosen identity is stored with the run (run.json), so an agent
restarted after a crash keeps honouring it (health checks, uid bookkeeping).
"""

from __future__ import annotations

import logging
import os
import pwd
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass

from peloton.agent.model import RunSpec
from peloton.agent.uidpool import pick_uid
from peloton.core.errors import FailedPrecondition

log = logging.getLogger(__name__)

NOBODY = "nobody"
FIRST_REGULAR_UID = 1000
DEFAULT_DYNAMIC_UIDS = (70000, 79999)


@dataclass(frozen=True, slots=True)
class TaskIdentity:
    """The uid, gid and supplementary groups a task runs with, and who that is."""

    uid: int
    gid: int
    groups: tuple[int, ...] = ()
    name: str = ""
    home: str = ""
    dynamic: bool = False

    def supervisor_args(self) -> list[str]:
        """`-u UID:GID [-G G1,G2]` for supervisor.c."""
        args = ["-u", f"{self.uid}:{self.gid}"]
        if self.groups:
            args += ["-G", ",".join(str(g) for g in self.groups)]
        return args

    def describe(self) -> str:
        """For the task's messages: "as alice (uid 1000)" or "as dynamic user 70003"."""
        if self.dynamic:
            return f"as dynamic user {self.uid}"
        return f"as {self.name or self.uid} (uid {self.uid})"


@dataclass(frozen=True, slots=True)
class IdentityPolicy:
    """What the agent's configuration allows (see the module docstring)."""

    allow_root: bool = False
    #: System accounts (uid < 1000) tasks may name anyway.
    system_users: tuple[str, ...] = ()
    dynamic_uids: tuple[int, int] = DEFAULT_DYNAMIC_UIDS

    @property
    def can_switch(self) -> bool:
        """Whether this agent can run tasks as other users (it is root)."""
        return os.geteuid() == 0

    def resolve(self, user: str, in_use: Collection[int],
                claim: Callable[[int], bool] | None = None, start: int = 0) -> TaskIdentity:
        """The identity of a new task whose job names `user` ("" = none).

        A dynamic uid is one that `claim` (the machine-wide claim, uidpool.UidClaims;
        None: this agent's `in_use` alone decides) takes, looked for from `start`.
        Raises FailedPrecondition when the job's user may not be used here.
        """
        if not self.can_switch:
            me = pwd.getpwuid(os.geteuid())
            if user and user != me.pw_name:
                raise FailedPrecondition(
                    f"this agent runs as {me.pw_name}, not root, so tasks cannot run as {user!r}")
            return TaskIdentity(os.geteuid(), os.getegid(), (), me.pw_name, me.pw_dir)
        entry = _account(user) if user else None
        if entry is None:
            return self._dynamic(in_use, claim, start)
        if entry.pw_uid == 0 and not self.allow_root:
            raise FailedPrecondition(
                f"tasks may not run as {user!r} (uid 0) on this agent; start it with "
                "--allow-root-tasks to allow root")
        if (0 < entry.pw_uid < FIRST_REGULAR_UID and entry.pw_name != NOBODY
                and entry.pw_name not in self.system_users):
            raise FailedPrecondition(
                f"tasks may not run as system account {user!r} (uid {entry.pw_uid}) on this "
                "agent; list it with --task-users to allow it")
        groups = tuple(g for g in os.getgrouplist(entry.pw_name, entry.pw_gid) if g != entry.pw_gid)
        return TaskIdentity(entry.pw_uid, entry.pw_gid, groups, entry.pw_name, entry.pw_dir)

    def _dynamic(self, in_use: Collection[int], claim: Callable[[int], bool] | None,
                 start: int) -> TaskIdentity:
        first, last = self.dynamic_uids
        taken = in_use if isinstance(in_use, (set, frozenset)) else set(in_use)
        uid = pick_uid(first, last, start=start, in_use=taken, known=_uid_known,
                       claim=claim or _unclaimed)
        if uid is None:
            raise FailedPrecondition(f"no free dynamic uid in {first}-{last}: too many tasks on "
                                     "this machine (this agent's and other agents')")
        return TaskIdentity(uid, uid, (), "", "", dynamic=True)


def _unclaimed(uid: int) -> bool:
    return True


def _account(name: str) -> pwd.struct_passwd | None:
    try:
        return pwd.getpwnam(name)
    except KeyError:
        return None


#: How long an answer of `_uid_known` is reused.  The lookup goes through NSS (for
#: "files", a parse of /etc/passwd: a sixth of the agent's CPU per launched task when asked
#: per task); an account added inside the dynamic range is seen within this time.
UID_LOOKUP_TTL_SECS = 30.0
_uid_answers: dict[int, tuple[bool, float]] = {}


def _uid_known(uid: int) -> bool:
    now = time.monotonic()
    cached = _uid_answers.get(uid)
    if cached is not None and now - cached[1] < UID_LOOKUP_TTL_SECS:
        return cached[0]
    try:
        pwd.getpwuid(uid)
        known = True
    except KeyError:
        known = False
    if len(_uid_answers) > 100_000:
        _uid_answers.clear()
    _uid_answers[uid] = (known, now)
    return known


def describe_identity(spec: RunSpec) -> str:
    """Who a run runs as, for its messages ("as alice (uid 1001)", "as dynamic user 61000")."""
    if spec.run_as:
        return f"as {spec.run_as} (uid {spec.uid})"
    named = spec.command.user
    return (f"as dynamic user {spec.uid}" + (f": no account {named!r} on this host"
                                               if named else ""))


def supervisor_identity_args(spec: RunSpec) -> list[str]:
    """The supervisor's arguments that make it run the task as the run's uid and groups
    (none when the agent does not switch users)."""
    if spec.uid < 0:
        return []
    args = ["-u", f"{spec.uid}:{spec.gid}"]
    if spec.groups:
        args += ["-G", ",".join(str(g) for g in spec.groups)]
    return args
