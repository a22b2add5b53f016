"""The cron half of the typed client: pelotonpy.api.cron.CronService on the job manager.

Cron jobs are our extension of Peloton's API (proto/pelotonpy/api/cron).
Failures come as gRPC status codes (NotFound, AlreadyExists,
InvalidArgument naming the field, ...), raised as peloton.core.errors.
"""

from __future__ import annotations

from peloton.api.client_transport import ServiceHandle
from peloton.api.gen.pelotonpy.api.cron import cron_pb2 as pb

#: ScheduleMode by name, for callers that do not import the generated module.
CREATE_OR_REPLACE, REPLACE_ONLY, CREATE_ONLY = (pb.SCHEDULE_MODE_CREATE_OR_REPLACE,
                                                pb.SCHEDULE_MODE_REPLACE_ONLY,
                                                pb.SCHEDULE_MODE_CREATE_ONLY)


class CronCalls:
    """Methods of CronService."""

    _cron: ServiceHandle

    def schedule_cron_job(self, job: pb.CronJob, *,
                          mode: int = CREATE_OR_REPLACE) -> pb.ScheduleCronJobResponse:
        """Create or replace a cron job (`mode`: CREATE_OR_REPLACE, REPLACE_ONLY, CREATE_ONLY)."""
        req = pb.ScheduleCronJobRequest(job=job, mode=mode)  # type: ignore[arg-type]
        return self._cron.call("ScheduleCronJob", req,
                               pb.ScheduleCronJobResponse)

    def deschedule_cron_job(self, name: str) -> bool:
        """Remove a cron job (runs in progress go on); whether it existed."""
        resp = self._cron.call("DescheduleCronJob", pb.DescheduleCronJobRequest(name=name),
                               pb.DescheduleCronJobResponse)
        return bool(resp.existed)

    def start_cron_job(self, name: str) -> str:
        """Start a run now; its job id ("" when the collision policy skipped it)."""
        resp = self._cron.call("StartCronJob", pb.StartCronJobRequest(name=name), pb.StartCronJobResponse)
        return str(resp.run_job_id)

    def get_cron_job(self, name: str) -> pb.CronJob:
        """One cron job (NotFound if absent)."""
        return self._cron.call("GetCronJob", pb.GetCronJobRequest(name=name), pb.GetCronJobResponse).job

    def list_cron_jobs(self, name_prefix: str = "") -> list[pb.CronJob]:
        """Cron jobs whose names start with `name_prefix`, sorted by name."""
        resp = self._cron.call("ListCronJobs", pb.ListCronJobsRequest(name_prefix=name_prefix),
                               pb.ListCronJobsResponse)
        return list(resp.jobs)
