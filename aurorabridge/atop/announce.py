"""An Aurora task's `announce` section as the pod labels that ask for service discovery.

Aurora's client puts the job's Announcer into the Thermos data of every task
(`executorConfig.data`: `{"announce": {"primary_port": "http", "portmap": {"aurora":
"http"}, "zk_path": ...}, "task": ...}`) and Aurora's executor registers each running
task in a ZooKeeper ServerSet from it.  There is no executor here: the bridge turns the
section into the labels of peloton/core/model/announce.py, and the announcer
(announcer/) and the Kubernetes backend act on them.  The path label is `zk_path` when
given, else `<role>/<environment>/<name>`, relative to the announcer's root (`/aurora` by
default), so members land where Aurora's executor puts them.

A task without the section (or whose data is not Thermos JSON) gets no label.
"""

from __future__ import annotations

import json
from typing import Any

from aurorabridge import labels
from aurorabridge.atop.job_key import JobKey
from peloton.core.errors import InvalidArgument
from peloton.core.model.announce import (
    ANNOUNCE_LABEL,
    DEFAULT_PRIMARY_PORT,
    PORTMAP_LABEL,
    PRIMARY_PORT_LABEL,
    PRIMARY_TEMPLATE,
    check_path,
    parse_portmap,
    portmap_label_value,
)

_FIELD = "executorConfig.data.announce"


def announce_section(task: Any) -> dict[str, Any] | None:
    """The task's Thermos `announce` object, or None when it has none."""
    executor = task.executorConfig
    data = executor.data if executor is not None else None
    if not data or not data.lstrip().startswith("{"):
        return None
    try:
        doc = json.loads(data)
    except ValueError:
        return None  # the command builder reports bad Thermos JSON
    section = doc.get("announce") if isinstance(doc, dict) else None
    if section is None:
        return None
    if not isinstance(section, dict):
        raise InvalidArgument("announce must be an Announcer object", field=_FIELD)
    return section


def announce_labels(task: Any, key: JobKey) -> list[Any]:
    """The pod labels announcing `task` of job `key` (none when it has no Announcer)."""
    section = announce_section(task)
    if section is None:
        return []
    primary = section.get("primary_port") or DEFAULT_PRIMARY_PORT
    if not isinstance(primary, str):
        raise InvalidArgument("primary_port must be a port name", field=f"{_FIELD}.primary_port")
    portmap = section.get("portmap")
    if portmap is None:
        portmap = {"aurora": PRIMARY_TEMPLATE}
    if not isinstance(portmap, dict):
        raise InvalidArgument("portmap must map port names to names or numbers",
                              field=f"{_FIELD}.portmap")
    try:
        resolved = parse_portmap(json.dumps(portmap), primary)
    except InvalidArgument as exc:
        raise InvalidArgument(exc.message, field=f"{_FIELD}.portmap") from None
    zk_path = section.get("zk_path")
    if zk_path is not None and not isinstance(zk_path, str):
        raise InvalidArgument("zk_path must be a string", field=f"{_FIELD}.zk_path")
    path = zk_path.strip() if zk_path and zk_path.strip() else f"{key.role}/{key.environment}/{key.name}"
    if zk_path and not path.startswith("/"):
        raise InvalidArgument(f"zk_path must be an absolute ZooKeeper path, got {zk_path!r}",
                              field=f"{_FIELD}.zk_path")
    check_path(path, f"{_FIELD}.zk_path")
    return [labels.label(ANNOUNCE_LABEL, path), labels.label(PRIMARY_PORT_LABEL, primary),
            labels.label(PORTMAP_LABEL, portmap_label_value(resolved))]
