"""Rows of the task_configs table (shared by the task and job modules)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from peloton.core.model.task import TaskSpec
from peloton.storage import codec


def task_config_rows(job_id: str, version: int, default: TaskSpec,
                     overrides: Mapping[int, TaskSpec]) -> list[dict[str, Any]]:
    """The default (instance -1) and override rows of one config version."""
    rows = [{"job_id": job_id, "version": version, "instance": -1, "body": codec.to_json(default)}]
    rows += [{"job_id": job_id, "version": version, "instance": i, "body": codec.to_json(spec)}
             for i, spec in sorted(overrides.items())]
    return rows
