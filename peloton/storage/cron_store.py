"""Contract of the cron job table (written by the job manager's cron component and API).

One row per cron job name holding the whole `CronJob`.  Writes after the
first are compare-and-set on `revision`, so two job managers in a leader
change can never both claim the same due time (peloton/core/cron/trigger.py).
"""

from __future__ import annotations

from typing import Protocol

from peloton.core.cron.model import CronJob


class CronJobStore(Protocol):
    """Cron jobs by name."""

    def create_cron_job(self, job: CronJob) -> CronJob:
        """Store a new cron job at revision 1 (returned).  AlreadyExists if the name is taken."""
        ...

    def get_cron_job(self, name: str) -> CronJob:
        """One cron job; NotFound if absent."""
        ...

    def get_cron_jobs(self) -> list[CronJob]:
        """Every cron job, sorted by name."""
        ...

    def update_cron_job(self, job: CronJob) -> CronJob:
        """Replace the cron job if its stored revision is `job.revision`; returns it at the next
        revision.  Conflict when the revision moved, NotFound when it is gone."""
        ...

    def delete_cron_job(self, name: str) -> bool:
        """Delete a cron job; whether it existed.  Idempotent."""
        ...
