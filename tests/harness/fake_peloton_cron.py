"""The fake Peloton's cron service and reconciliation trigger (see fake_peloton.py).

Cron jobs are kept by name as CronJob messages; a start creates a job from the
template at once (through the fake's own create_stateless_job), which is all the
bridge's handlers can observe.  Reconciliation requests are only recorded.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from peloton.api.gen.pelotonpy.api.cron import cron_pb2 as pb
from peloton.core.cron.schedule import parse
from peloton.core.errors import AlreadyExists, InvalidArgument, NotFound


class FakeCron:
    """Mixin of FakePeloton: cron jobs and reconciliation."""

    cron: dict[str, Any]
    # FakeState's record and FakePeloton's create_stateless_job, found through the MRO.
    record: Any
    create_stateless_job: Any

    def schedule_cron_job(self, job: Any, *, mode: int = 0) -> Any:
        self.record("schedule_cron_job", job=job, mode=mode)
        try:
            parse(job.schedule)
        except InvalidArgument as exc:
            raise InvalidArgument(f"schedule: {exc.message}", field="schedule") from None
        exists = job.name in self.cron
        if mode == pb.SCHEDULE_MODE_REPLACE_ONLY and not exists:
            raise NotFound(f"No cron job found for {job.name}.")
        if mode == pb.SCHEDULE_MODE_CREATE_ONLY and exists:
            raise AlreadyExists(f"cron job {job.name} already exists")
        stored = pb.CronJob()
        stored.CopyFrom(job)
        stored.next_run_ms = parse(job.schedule).next_after(1_900_000_000_000) or 0
        if exists:
            stored.last_run_job_id = self.cron[job.name].last_run_job_id
        self.cron[job.name] = stored
        return pb.ScheduleCronJobResponse(job=stored, created=not exists)

    def deschedule_cron_job(self, name: str) -> bool:
        self.record("deschedule_cron_job", name=name)
        return self.cron.pop(name, None) is not None

    def start_cron_job(self, name: str) -> str:
        self.record("start_cron_job", name=name)
        if name not in self.cron:
            raise NotFound(f"No cron job found for {name}.")
        job = self.cron[name]
        run = str(self.create_stateless_job(job.stateless_spec).job_id.value)
        job.last_run_job_id = run
        return run

    def get_cron_job(self, name: str) -> Any:
        if name not in self.cron:
            raise NotFound(f"cron job {name} not found")
        return self.cron[name]

    def list_cron_jobs(self, name_prefix: str = "") -> list[Any]:
        return [j for n, j in sorted(self.cron.items()) if n.startswith(name_prefix)]

    def reconcile_tasks(self, run_ids: Sequence[str] | None = None) -> None:
        self.record("reconcile_tasks", run_ids=None if run_ids is None else list(run_ids))
