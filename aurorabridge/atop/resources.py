"""The resources of an Aurora TaskConfig, from `resources` or the older scalar fields.

Aurora merges the pre-`resources` fields (numCpus, ramMb, diskMb,
requestedPorts) when `resources` is absent (ThriftBackfill); so do we.
Rules (ConfigurationManager): cpus, ram and disk are required and > 0, each
singleton kind appears once, GPUs are >= 0 and only if allowed; the
`udeploy_num_gpus` metadata overrides the GPU count (Peloton's bridge).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from aurorabridge.labels import GPU_METADATA_KEY
from peloton.core.errors import InvalidArgument
from peloton.core.model.resources import check_amount


@dataclass(frozen=True, slots=True)
class TaskResources:
    """Resources of one task."""

    cpus: float
    ram_mb: int
    disk_mb: int
    gpus: float
    ports: tuple[str, ...]

    @property
    def wants_gpu(self) -> bool:
        """Whether the task asks for GPUs (it then goes to the GPU pool)."""
        return self.gpus > 0


def _metadata_gpus(task: Any) -> float | None:
    for m in task.metadata or ():
        if m.key == GPU_METADATA_KEY:
            try:
                value = float(m.value)
            except (TypeError, ValueError):
                raise InvalidArgument(f"metadata {GPU_METADATA_KEY}={m.value!r} is not a number",
                                      field="metadata") from None
            if not math.isfinite(value) or value < 0:
                raise InvalidArgument(f"metadata {GPU_METADATA_KEY} must be >= 0", field="metadata")
            return value
    return None


def task_resources(task: Any, allow_gpus: bool = True) -> TaskResources:
    """Extract and validate the resources of `task`."""
    found: dict[str, Any] = {}
    ports: list[str] = []
    if task.resources:
        for res in task.resources:
            for kind in ("numCpus", "ramMb", "diskMb", "numGpus"):
                value = getattr(res, kind)
                if value is not None:
                    if kind in found:
                        raise InvalidArgument(f"resource {kind} is given more than once", field=kind)
                    found[kind] = value
            if res.namedPort is not None:
                ports.append(res.namedPort)
    else:
        for kind in ("numCpus", "ramMb", "diskMb"):
            if getattr(task, kind) is not None:
                found[kind] = getattr(task, kind)
        ports = list(task.requestedPorts or ())
    for kind, label in (("numCpus", "cpu"), ("ramMb", "ram"), ("diskMb", "disk")):
        value = found.get(kind)
        if value is None:
            raise InvalidArgument(f"task resources must include {label} ({kind})", field=kind)
        if not math.isfinite(float(value)) or value <= 0:
            raise InvalidArgument(f"{kind} must be greater than 0, got {value}", field=kind)
        check_amount(float(value), kind)
    gpus = float(found.get("numGpus") or 0)
    override = _metadata_gpus(task)
    if override is not None:
        gpus = override
    if gpus < 0:
        raise InvalidArgument(f"numGpus must be >= 0, got {gpus:g}", field="numGpus")
    check_amount(gpus, "numGpus")
    if gpus > 0 and not allow_gpus:
        raise InvalidArgument("GPU resources are not allowed on this cluster", field="numGpus")
    for port in ports:
        if not isinstance(port, str) or not port:
            raise InvalidArgument("named ports must be non-empty strings", field="namedPort")
    return TaskResources(float(found["numCpus"]), int(found["ramMb"]), int(found["diskMb"]), gpus,
                         tuple(sorted(set(ports))))
