"""The users file: users, roles and settings, in the shape of Peloton's BASIC auth YAML.

    users:
    - role: reader                  # no username: the default user (callers without credentials)
    - username: alice
      password_hash: scrypt$14$8$1$...   # from `peloton auth hash-password`
      role: dev
    - username: agent-1             # an agent; with TLS, a client certificate whose common
      certificate: true             # name is agent-1 logs in as this user, no password needed
      role: agent
    - username: peloton
      password_hash: scrypt$...
      role: root
    roles:
    - role: reader
      accept: ['peloton.api.v1alpha.job.stateless.svc.JobService:Get*']
      reject: []
    - role: dev
      accept: ['peloton.api.v1alpha.job.stateless.svc.JobService:*', ...]
      pools: ['/team/*']            # our extensions, see policy.py
      owners: [self]
      task_users: [alice]
    - role: root
      accept: ['*']
    internal_user: peloton          # daemons call each other as this user (root role)
    internal_password_file: internal.secret   # its password, in clear, mode 0600
    token_key_file: token.key       # signs login tokens; created (0600) if missing
    token_ttl_secs: 43200
    audit_log: audit.log            # JSON lines, one per mutating call

It is Peloton's format with one deliberate difference: a password is stored
only as `password_hash`, never in clear.  A Peloton file with `password:`
entries is refused with a message saying how to convert it.  Relative paths
are relative to the file.  The checks are Peloton's (one default user at most,
every user's role defined, the internal user's role a root role) plus ours;
each error names the entry at fault.  A users file that group or others may
read or write is loaded with a warning (its hashes can be cracked offline, and
whoever can write it can make themselves root); the token key and the internal
password file are refused outright in that case (tokens.check_private).
"""

from __future__ import annotations

import logging
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from peloton.common.auth.passwords import BadHash, parse_hash
from peloton.common.auth.policy import MATCH_ALL, Role, Rule
from peloton.common.auth.tokens import DEFAULT_TTL_SECS, check_private
from peloton.common.config import from_mapping
from peloton.core.errors import InvalidArgument

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class UserEntry:
    """One user of the file ("" username: the default user)."""

    username: str
    role: str
    password_hash: str = ""
    certificate: bool = False


@dataclass(frozen=True)
class AuthConfig:
    """A parsed, checked users file."""

    users: tuple[UserEntry, ...] = ()
    roles: Mapping[str, Role] = field(default_factory=dict)
    internal_user: str = ""
    internal_password_file: Path | None = None
    token_key_file: Path | None = None
    token_ttl_secs: float = DEFAULT_TTL_SECS
    audit_log: Path | None = None
    source: str = ""

    def user(self, name: str) -> UserEntry | None:
        """The entry of `name` ("" = the default user), if any."""
        return next((u for u in self.users if u.username == name), None)

    def internal_password(self) -> str | None:
        """The internal user's password from `internal_password_file` (None without one)."""
        if self.internal_password_file is None:
            return None
        path = self.internal_password_file
        try:
            check_private(path)
            secret = path.read_text().strip()
        except OSError as exc:
            raise InvalidArgument(f"{self.source}: internal_password_file {path}: {exc}",
                                  field="internal_password_file") from None
        if not secret:
            raise InvalidArgument(f"{self.source}: internal_password_file {path} is empty",
                                  field="internal_password_file")
        return secret


@dataclass(frozen=True, slots=True)
class _RoleDoc:
    """A role as written (the strict reader refuses unknown keys and wrong types)."""

    role: str = ""
    accept: tuple[str, ...] = ()
    reject: tuple[str, ...] = ()
    pools: tuple[str, ...] | None = None
    owners: tuple[str, ...] | None = None
    task_users: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class _UserDoc:
    """A user as written."""

    username: str = ""
    password_hash: str = ""
    role: str = ""
    certificate: bool = False


@dataclass(frozen=True, slots=True)
class _UsersFile:
    """The whole file as written (see the module docstring)."""

    users: tuple[_UserDoc, ...] = ()
    roles: tuple[_RoleDoc, ...] = ()
    internal_user: str = ""
    internal_password_file: str = ""
    token_key_file: str = ""
    token_ttl_secs: float = DEFAULT_TTL_SECS
    audit_log: str = ""


def _role(doc: _RoleDoc, i: int) -> Role:
    if not doc.role:
        raise InvalidArgument(f"roles[{i}]: every role needs a name (`role:`)", field=f"roles[{i}]")
    where = f"roles[{doc.role}]"
    return Role(name=doc.role,
                accept=tuple(Rule.parse(r, f"{where}.accept") for r in doc.accept),
                reject=tuple(Rule.parse(r, f"{where}.reject") for r in doc.reject),
                pools=doc.pools if doc.pools is not None else (MATCH_ALL,),
                owners=doc.owners if doc.owners is not None else ("self",),
                task_users=doc.task_users)


def _user(doc: _UserDoc, i: int, roles: Mapping[str, Role]) -> UserEntry:
    where = f"users[{doc.username}]" if doc.username else f"users[{i}]"
    if not doc.role:
        raise InvalidArgument(f"{where}: no role specified for user", field=where)
    if doc.role not in roles:
        raise InvalidArgument(f"{where}: undefined role {doc.role!r}", field=where)
    if doc.password_hash and not doc.username:
        raise InvalidArgument(f"{where}: no username specified for user", field=where)
    if doc.username and not doc.password_hash and not doc.certificate:
        raise InvalidArgument(f"{where}: no password_hash specified for user (or "
                              "`certificate: true` for a client-certificate-only user)", field=where)
    if doc.password_hash:
        try:
            parse_hash(doc.password_hash)
        except BadHash as exc:
            raise InvalidArgument(f"{where}: password_hash: {exc}", field=where) from None
    return UserEntry(doc.username, doc.role, doc.password_hash, doc.certificate)


def _read(doc: Any, source: str) -> _UsersFile:
    """The file through the strict reader: a wrong type, an unknown key or a bad value is an
    error naming the file, the key and the value (`certificate: "false"` is not true, a
    `token_ttl_secs` of "abc" is no number)."""
    if not isinstance(doc, Mapping):
        raise InvalidArgument(f"{source}: expected a mapping with users and roles", field="auth")
    for i, user in enumerate(doc.get("users") or ()):
        if isinstance(user, Mapping) and "password" in user:
            where = f"users[{user.get('username') or i}]"
            raise InvalidArgument(
                f"{source}: {where}: passwords are not stored in clear; replace `password:` with "
                "`password_hash:` and the output of `peloton auth hash-password`", field=where)
    cleaned = {k: v for k, v in doc.items() if v is not None}
    try:
        return from_mapping(_UsersFile, cleaned)
    except InvalidArgument as exc:
        raise InvalidArgument(f"{source}: {exc.message}", field=exc.field or "auth") from None


def parse(doc: Any, *, base: Path = Path("."), source: str = "<auth config>") -> AuthConfig:
    """Check and convert a loaded users document (see the module docstring)."""
    raw = _read(doc, source)
    roles: dict[str, Role] = {}
    for i, r in enumerate(raw.roles):
        role = _role(r, i)
        if role.name in roles:
            raise InvalidArgument(f"{source}: same role defined more than once: {role.name}",
                                  field=f"roles[{role.name}]")
        roles[role.name] = role
    users: list[UserEntry] = []
    for i, u in enumerate(raw.users):
        entry = _user(u, i, roles)
        if any(x.username == entry.username for x in users):
            what = entry.username or "default user"
            problem = (f"same user defined more than once: {what}" if entry.username
                       else "more than one default user specified")
            raise InvalidArgument(f"{source}: {problem}", field=f"users[{what}]")
        users.append(entry)
    internal = raw.internal_user
    if internal:
        found = next((u for u in users if u.username == internal), None)
        if found is None:
            raise InvalidArgument(f"{source}: undefined internal user {internal!r}", field="internal_user")
        if not roles[found.role].is_root:
            raise InvalidArgument(f"{source}: role for internal user must accept * and reject no "
                                  "method", field="internal_user")

    def path(value: str) -> Path | None:
        return None if not value else (base / value)

    if not 0 < raw.token_ttl_secs <= 366 * 86400:
        raise InvalidArgument(f"{source}: token_ttl_secs must be more than 0 and at most a year, "
                              f"got {raw.token_ttl_secs}", field="token_ttl_secs")
    return AuthConfig(users=tuple(users), roles=roles, internal_user=internal,
                      internal_password_file=path(raw.internal_password_file),
                      token_key_file=path(raw.token_key_file), token_ttl_secs=raw.token_ttl_secs,
                      audit_log=path(raw.audit_log), source=source)


def load(path: str | Path) -> AuthConfig:
    """Read and check a users file."""
    p = Path(path)
    try:
        doc = yaml.safe_load(p.read_text())
        mode = p.stat().st_mode
    except (OSError, yaml.YAMLError) as exc:
        raise InvalidArgument(f"cannot read the auth config {p}: {exc}", field="auth") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        log.warning("the auth config %s may be read or written by others (mode %s): its "
                    "password hashes can be cracked offline; chmod 600 it", p,
                    stat.filemode(mode))
    return parse(doc, base=p.resolve().parent, source=str(p))
