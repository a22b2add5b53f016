"""The archiver's knobs: Peloton's names (`pkg/archiver/config/config.go`), shorter defaults.

Peloton's defaults suit a fleet that keeps 30 days of finished jobs hot and
archives once a day; ours suit a cluster a person runs, where a day-old
finished job is history.  Durations are seconds.

| knob                          | Peloton | here   |
|-------------------------------|---------|--------|
| archive_interval              | 24 h    | 10 min |
| archive_age                   | 720 h   | 24 h   |
| archive_step_size             | 24 h    | 1 h    |
| max_archive_entries           | 5000    | 5000   |
| peloton_client_timeout        | 20 s    | 20 s   |
| max_retry_attempts_job_query  | 3       | 3      |
| retry_interval_job_query      | 10 s    | 2 s    |
| bootstrap_delay               | 180 s   | 10 s   |
| pod_events_cleanup            | false   | true   |
| stream_only_mode              | false   | false  |

`enable` is on: running the archiver is the choice to archive.  Added
knobs: `pod_events_keep_runs` (Peloton's hard-coded 100), `delete_delay`
(its hard-coded 100 ms between deletes) and `jitter_max` (its 100 ms).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from peloton.common.retry import RetryPolicy
from peloton.core.errors import InvalidArgument

HOUR = 3600.0


@dataclass(frozen=True, slots=True)
class ArchiverConfig:
    """How and when the archiver runs."""

    enable: bool = True
    pod_events_cleanup: bool = True
    stream_only_mode: bool = False
    archive_interval: float = 600.0
    max_archive_entries: int = 5000
    archive_age: float = 24 * HOUR
    archive_step_size: float = HOUR
    peloton_client_timeout: float = 20.0
    max_retry_attempts_job_query: int = 3
    retry_interval_job_query: float = 2.0
    bootstrap_delay: float = 10.0
    pod_events_keep_runs: int = 100
    delete_delay: float = 0.1
    jitter_max: float = 0.1

    def __post_init__(self) -> None:
        for name in ("archive_interval", "archive_age", "peloton_client_timeout",
                     "retry_interval_job_query", "bootstrap_delay", "delete_delay", "jitter_max"):
            if getattr(self, name) < 0:
                raise InvalidArgument(f"{name} must be >= 0", field=name)
        if self.archive_step_size <= 0:
            raise InvalidArgument("archive_step_size must be > 0", field="archive_step_size")
        if not 1 <= self.max_archive_entries <= 5000:  # 5000: the job manager's page cap
            raise InvalidArgument("max_archive_entries must be in [1, 5000]", field="max_archive_entries")
        if self.max_retry_attempts_job_query < 1:
            raise InvalidArgument("max_retry_attempts_job_query must be >= 1",
                                  field="max_retry_attempts_job_query")
        if self.pod_events_keep_runs < 1:
            raise InvalidArgument("pod_events_keep_runs must be >= 1", field="pod_events_keep_runs")

    def retry_policy(self) -> RetryPolicy:
        """Peloton's fixed-interval retry of API calls (attempts include the first call)."""
        return RetryPolicy(attempts=self.max_retry_attempts_job_query,
                           initial_delay=self.retry_interval_job_query,
                           max_delay=self.retry_interval_job_query, multiplier=1.0, jitter=0.1)


@dataclass(frozen=True, slots=True)
class ArchiverFile:
    """Schema of `peloton archiver -c FILE` (Peloton's config/archiver/*.yaml layout)."""

    archiver: ArchiverConfig = field(default_factory=ArchiverConfig)
