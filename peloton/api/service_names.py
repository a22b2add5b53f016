"""Service names Peloton serves under more than one path."""

from __future__ import annotations

#: v0 services Peloton serves under a second, package-less name.
LEGACY_ALIASES = {
    "peloton.api.v0.job.JobManager": "peloton.api.job.JobManager",
    "peloton.api.v0.task.TaskManager": "peloton.api.task.TaskManager",
    "peloton.api.v0.respool.ResourceManager": "peloton.api.respool.ResourceManager",
}
