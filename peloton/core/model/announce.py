"""Service announcement: which tasks are registered for discovery, where, and with which endpoints.

A task asks to be announced with pod (task) labels, the same for native Peloton jobs and for
Aurora jobs (the Aurora bridge writes them from the `announce` section of the Thermos data):

* `peloton/announce` = the ServerSet path.  Absolute (`/services/web`) is used as written;
  relative (`www/prod/hello`) is below the announcer's root (default `/aurora`, Aurora's
  executor's `--announcer-serverset-path`); empty means `<root>/<job name>`.  So a bridge
  job `www/prod/hello` lands at `/aurora/www/prod/hello`, where Aurora's executor puts it.
* `peloton/announce-primary-port` = the named port of the member's `serviceEndpoint`
  (default `http`, Aurora's `primary_port`).
* `peloton/announce-portmap` = Aurora's `portmap` as JSON: names aliased to other names
  (`{"aurora": "http"}`) or to fixed numbers (`{"https": 443}`).  Default
  `{"aurora": <primary port>}`, as Aurora's Announcer.

Endpoints follow Aurora's executor (`resolve_ports`, `make_endpoints`): the portmap,
overridden by the ports the run was assigned, aliases followed to a number; every name
that ends at a number is an additional endpoint, and the primary endpoint is the primary
port's number, 0 when it has none.

Pure functions, no I/O: the announcer (ZooKeeper ServerSets) and the Kubernetes backend
(a Service per announced job) read the same labels through them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from peloton.core.errors import InvalidArgument

ANNOUNCE_LABEL = "peloton/announce"
PRIMARY_PORT_LABEL = "peloton/announce-primary-port"
PORTMAP_LABEL = "peloton/announce-portmap"
#: Aurora's executor's default root of announcements (`--announcer-serverset-path`).
DEFAULT_ROOT = "/aurora"
#: Aurora's Announcer default `primary_port`.
DEFAULT_PRIMARY_PORT = "http"
#: Aurora's Announcer default portmap value of `aurora`, bound to the primary port.
PRIMARY_TEMPLATE = "{{primary_port}}"
_TEMPLATE = re.compile(r"\{\{\s*primary_port\s*\}\}")


class KeyValue(Protocol):
    """Anything with a label's `key` and `value` (core Label, protobuf Label)."""

    @property
    def key(self) -> str: ...

    @property
    def value(self) -> str: ...


@dataclass(frozen=True, slots=True)
class Announce:
    """What a task's labels ask for; `path` as written (see `serverset_path`)."""

    path: str
    primary_port: str = DEFAULT_PRIMARY_PORT
    #: (name, target): a target is another port's name or a fixed port number.
    portmap: tuple[tuple[str, str | int], ...] = ()


def _target(value: object, name: str) -> str | int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise InvalidArgument(f"portmap {name!r} must map to a port name or number, got {value!r}",
                              field=f"labels.{PORTMAP_LABEL}")
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, int) and not 0 < value < 65536:
        raise InvalidArgument(f"portmap {name!r}: port {value} is out of range",
                              field=f"labels.{PORTMAP_LABEL}")
    return value


def parse_portmap(text: str, primary_port: str) -> tuple[tuple[str, str | int], ...]:
    """A portmap label's JSON (empty: Aurora's default) with `{{primary_port}}` bound."""
    if not text.strip():
        return (("aurora", primary_port),)
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise InvalidArgument(f"label {PORTMAP_LABEL} is not JSON: {exc}",
                              field=f"labels.{PORTMAP_LABEL}") from None
    if not isinstance(doc, dict):
        raise InvalidArgument(f"label {PORTMAP_LABEL} must be a JSON object of name -> port",
                              field=f"labels.{PORTMAP_LABEL}")
    out: list[tuple[str, str | int]] = []
    for name, value in doc.items():
        if isinstance(value, str):
            value = _TEMPLATE.sub(primary_port, value)
        out.append((str(name), _target(value, str(name))))
    return tuple(sorted(out, key=lambda item: item[0]))


def portmap_label_value(portmap: Iterable[tuple[str, str | int]]) -> str:
    """The portmap as the label's compact JSON, names sorted."""
    return json.dumps(dict(sorted(portmap, key=lambda item: item[0])), separators=(",", ":"))


def announce_of(labels: Iterable[KeyValue]) -> Announce | None:
    """The announcement `labels` ask for, or None; InvalidArgument naming a bad label."""
    found = {lab.key: lab.value for lab in labels
             if lab.key in (ANNOUNCE_LABEL, PRIMARY_PORT_LABEL, PORTMAP_LABEL)}
    if ANNOUNCE_LABEL not in found:
        return None
    path = found[ANNOUNCE_LABEL].strip()
    check_path(path, f"labels.{ANNOUNCE_LABEL}")
    primary = found.get(PRIMARY_PORT_LABEL, "").strip() or DEFAULT_PRIMARY_PORT
    return Announce(path, primary, parse_portmap(found.get(PORTMAP_LABEL, ""), primary))


def check_path(path: str, field: str) -> None:
    """A ServerSet path as a label may give it: no empty, `.` or `..` components inside."""
    parts = path.strip("/").split("/") if path.strip("/") else []
    if any(p in ("", ".", "..") for p in parts):
        raise InvalidArgument(f"announce path {path!r} has an empty, '.' or '..' component",
                              field=field)


def _join(*parts: str) -> str:
    pieces = [p for part in parts for p in part.split("/") if p]
    return "/" + "/".join(pieces)


def serverset_path(announce: Announce, root: str, job_name: str) -> str:
    """Where the members go: absolute as written, relative below `root`, empty `<root>/<job>`."""
    if announce.path.startswith("/"):
        return _join(announce.path)
    return _join(root, announce.path or job_name)


def resolve_ports(portmap: Iterable[tuple[str, str | int]],
                  assigned: Mapping[str, int]) -> dict[str, int]:
    """Name -> number: the portmap with the assigned ports over it, aliases followed; names
    that end at no number (an alias of a port the run was not given) are left out."""
    table: dict[str, str | int] = dict(portmap)
    table.update(assigned)
    out: dict[str, int] = {}
    for name in table:
        seen = {name}
        target = table[name]
        while isinstance(target, str) and target in table and target not in seen:
            seen.add(target)
            target = table[target]
        if isinstance(target, int):
            out[name] = target
    return out


@dataclass(frozen=True, slots=True)
class Endpoints:
    """A member's endpoints: the primary one and every named one, on `host`."""

    host: str
    primary: int
    named: tuple[tuple[str, int], ...]


def endpoints(announce: Announce, host: str, assigned: Mapping[str, int]) -> Endpoints:
    """What Aurora's executor announces for a run on `host` with its assigned ports."""
    ports = resolve_ports(announce.portmap, assigned)
    return Endpoints(host, ports.get(announce.primary_port, 0), tuple(sorted(ports.items())))
