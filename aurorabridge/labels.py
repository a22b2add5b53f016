"""Peloton labels that carry Aurora identity, as Peloton's bridge wrote them.

Job labels `aurora_job_key_{role,environment,name}` make partial job keys
queryable through QueryJobs; `aurora_bridge` marks jobs the bridge owns (only
those are listed to Aurora clients).  Pod labels: `aurora_bridge_pod`, the
full key `aurora_job_key=role/env/name` (what host `limit` constraints count),
each Aurora Metadata entry as `org.apache.aurora.metadata.<key>`, and
`aurora_bridge_update`, a throw-away value flipped to force a restart of an
instance whose spec did not otherwise change.  Keys and values are kept
byte-identical so jobs written by either bridge read back in the other.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from peloton.api.gen.peloton.api.v1alpha import peloton_pb2
from peloton.core.feasibility import QUEUE_ANYWAY as QUEUE_ANYWAY  # the job label asking to queue

BRIDGE_JOB = ("aurora_bridge", "com.uber.peloton.internal.aurorabridge")
BRIDGE_POD = ("aurora_bridge_pod", "com.uber.peloton.internal.aurorabridge_pod")
UPDATE_KEY = "aurora_bridge_update"
JOB_KEY = "aurora_job_key"
ROLE_KEY = "aurora_job_key_role"
ENVIRONMENT_KEY = "aurora_job_key_environment"
NAME_KEY = "aurora_job_key_name"
METADATA_PREFIX = "org.apache.aurora.metadata."
#: Metadata key with which udeploy asked for GPUs (overrides numGpus).
GPU_METADATA_KEY = "udeploy_num_gpus"


def label(key: str, value: str) -> Any:
    """A v1alpha Label."""
    return peloton_pb2.Label(key=key, value=value)


def job_labels(role: str, environment: str, name: str) -> list[Any]:
    """Labels on a bridge-created job."""
    return [label(ROLE_KEY, role), label(ENVIRONMENT_KEY, environment), label(NAME_KEY, name),
            label(*BRIDGE_JOB)]


def query_labels(role: str = "", environment: str = "", name: str = "") -> list[Any]:
    """Labels selecting bridge jobs matching the non-empty parts of a job key."""
    out = [label(k, v) for k, v in ((ROLE_KEY, role), (ENVIRONMENT_KEY, environment), (NAME_KEY, name)) if v]
    return [*out, label(*BRIDGE_JOB)]


def job_key_label(role: str, environment: str, name: str) -> Any:
    """The pod label naming the whole job key."""
    return label(JOB_KEY, f"{role}/{environment}/{name}")


def metadata_labels(metadata: Iterable[tuple[str, str]]) -> list[Any]:
    """Aurora Metadata pairs as pod labels."""
    return [label(METADATA_PREFIX + key, value) for key, value in metadata]


def parse_metadata(labels: Iterable[Any]) -> list[tuple[str, str]]:
    """Aurora Metadata pairs found in pod labels."""
    return [(lab.key[len(METADATA_PREFIX):], lab.value) for lab in labels
            if lab.key.startswith(METADATA_PREFIX)]


def value_of(labels: Iterable[Any], key: str) -> str | None:
    """The value of the first label named `key`."""
    for lab in labels:
        if lab.key == key:
            return str(lab.value)
    return None
