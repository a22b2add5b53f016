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
each error names the entry at fault.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from peloton.common.auth.passwords import BadHash, parse_hash
from peloton.common.auth.policy import MATCH_ALL, Role, Rule
from peloton.common.auth.tokens import DEFAULT_TTL_SECS, check_private
from peloton.core.errors import InvalidArgument


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


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise InvalidArgument(f"{where}: expected a list of strings", field=where)
    return tuple(str(v) for v in value)


def _role(doc: Any, i: int) -> Role:
    where = f"roles[{i}]"
    if not isinstance(doc, Mapping) or not doc.get("role"):
        raise InvalidArgument(f"{where}: every role needs a name (`role:`)", field=where)
    name = str(doc["role"])
    where = f"roles[{name}]"
    unknown = set(doc) - {"role", "accept", "reject", "pools", "owners", "task_users"}
    if unknown:
        raise InvalidArgument(f"{where}: unknown keys {sorted(unknown)}", field=where)
    accept = tuple(Rule.parse(r, f"{where}.accept") for r in _strings(doc.get("accept"), f"{where}.accept"))
    reject = tuple(Rule.parse(r, f"{where}.reject") for r in _strings(doc.get("reject"), f"{where}.reject"))
    return Role(name=name, accept=accept, reject=reject,
                pools=_strings(doc.get("pools", [MATCH_ALL]), f"{where}.pools"),
                owners=_strings(doc.get("owners", ["self"]), f"{where}.owners"),
                task_users=_strings(doc.get("task_users"), f"{where}.task_users"))


def _user(doc: Any, i: int, roles: Mapping[str, Role]) -> UserEntry:
    where = f"users[{i}]"
    if not isinstance(doc, Mapping):
        raise InvalidArgument(f"{where}: expected a mapping", field=where)
    name = str(doc.get("username") or "")
    if name:
        where = f"users[{name}]"
    if "password" in doc:
        raise InvalidArgument(
            f"{where}: passwords are not stored in clear; replace `password:` with "
            "`password_hash:` and the output of `peloton auth hash-password`", field=where)
    unknown = set(doc) - {"username", "password_hash", "role", "certificate"}
    if unknown:
        raise InvalidArgument(f"{where}: unknown keys {sorted(unknown)}", field=where)
    role = str(doc.get("role") or "")
    if not role:
        raise InvalidArgument(f"{where}: no role specified for user", field=where)
    if role not in roles:
        raise InvalidArgument(f"{where}: undefined role {role!r}", field=where)
    hashed = str(doc.get("password_hash") or "")
    certificate = bool(doc.get("certificate", False))
    if hashed and not name:
        raise InvalidArgument(f"{where}: no username specified for user", field=where)
    if name and not hashed and not certificate:
        raise InvalidArgument(f"{where}: no password_hash specified for user (or "
                              "`certificate: true` for a client-certificate-only user)", field=where)
    if hashed:
        try:
            parse_hash(hashed)
        except BadHash as exc:
            raise InvalidArgument(f"{where}: password_hash: {exc}", field=where) from None
    return UserEntry(name, role, hashed, certificate)


def parse(doc: Any, *, base: Path = Path("."), source: str = "<auth config>") -> AuthConfig:
    """Check and convert a loaded users document (see the module docstring)."""
    if not isinstance(doc, Mapping):
        raise InvalidArgument(f"{source}: expected a mapping with users and roles", field="auth")
    unknown = set(doc) - {"users", "roles", "internal_user", "internal_password_file",
                          "token_key_file", "token_ttl_secs", "audit_log"}
    if unknown:
        raise InvalidArgument(f"{source}: unknown keys {sorted(unknown)}", field="auth")
    roles: dict[str, Role] = {}
    for i, r in enumerate(doc.get("roles") or []):
        role = _role(r, i)
        if role.name in roles:
            raise InvalidArgument(f"{source}: same role defined more than once: {role.name}",
                                  field=f"roles[{role.name}]")
        roles[role.name] = role
    users: list[UserEntry] = []
    for i, u in enumerate(doc.get("users") or []):
        entry = _user(u, i, roles)
        if any(x.username == entry.username for x in users):
            what = entry.username or "default user"
            problem = (f"same user defined more than once: {what}" if entry.username
                       else "more than one default user specified")
            raise InvalidArgument(f"{source}: {problem}", field=f"users[{what}]")
        users.append(entry)
    internal = str(doc.get("internal_user") or "")
    if internal:
        found = next((u for u in users if u.username == internal), None)
        if found is None:
            raise InvalidArgument(f"{source}: undefined internal user {internal!r}", field="internal_user")
        if not roles[found.role].is_root:
            raise InvalidArgument(f"{source}: role for internal user must accept * and reject no "
                                  "method", field="internal_user")

    def path(key: str) -> Path | None:
        value = doc.get(key)
        return None if not value else (base / str(value))

    ttl = float(doc.get("token_ttl_secs") or DEFAULT_TTL_SECS)
    if ttl <= 0:
        raise InvalidArgument(f"{source}: token_ttl_secs must be > 0", field="token_ttl_secs")
    return AuthConfig(users=tuple(users), roles=roles, internal_user=internal,
                      internal_password_file=path("internal_password_file"),
                      token_key_file=path("token_key_file"), token_ttl_secs=ttl,
                      audit_log=path("audit_log"), source=source)


def load(path: str | Path) -> AuthConfig:
    """Read and check a users file."""
    p = Path(path)
    try:
        doc = yaml.safe_load(p.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise InvalidArgument(f"cannot read the auth config {p}: {exc}", field="auth") from None
    return parse(doc, base=p.resolve().parent, source=str(p))
