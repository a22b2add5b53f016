"""One job of a `.aurora` file, loaded, bound, checked and ready to send.

`get_config(path, cluster, role, env, name, bindings)` loads the file (or its
JSON form), picks the job with that key, applies the `--bind` bindings and
Aurora's standard ones, and checks it (ConfigError naming file:line and the
field).  The result converts to the Thrift JobConfiguration and
JobUpdateSettings the `aurora` command sends.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pystachio import Empty

from aurorabridge.client import convert, loader, update_settings, validate
from aurorabridge.client.origins import origin_of


class JobConfig:
    """A checked job of a config file."""

    def __init__(self, job: Any, path: str, index: int = 0) -> None:
        self.path = path
        self._job = validate.standard_bindings(job)
        validate.check(self._job, path, f"jobs[{index}]")

    def raw(self) -> Any:
        """The Pystachio Job (bindings applied)."""
        return self._job

    def update_job(self, job: Any) -> None:
        """Replace the job (after a tier backfill)."""
        self._job = job

    def _text(self, field: Any) -> str:
        return "" if field is Empty else str(field.get())

    def cluster(self) -> str:
        """The job's cluster."""
        return self._text(self._job.cluster())

    def role(self) -> str:
        """The job's role."""
        return self._text(self._job.role())

    def environment(self) -> str:
        """The job's environment."""
        return self._text(self._job.environment())

    def name(self) -> str:
        """The job's name."""
        return self._text(self._job.name())

    def instances(self) -> int:
        """The instance count."""
        return int(self._job.instances().get())

    def has_cron_schedule(self) -> bool:
        """Whether the job is a cron job."""
        return bool(self._job.has_cron_schedule())

    def job(self, metadata: Iterable[tuple[str, str]] = ()) -> Any:
        """The Thrift JobConfiguration."""
        return convert.job_configuration(self._job, metadata)

    def update_settings(self, instances: Iterable[int] | None = None) -> Any:
        """The Thrift JobUpdateSettings of the job's update_config."""
        return update_settings.job_update_settings(self._job.update_config(), instances)

    def where(self) -> str:
        """file:line of the job (the file alone when unknown)."""
        origin = origin_of(self._job)
        return str(origin) if origin else self.path


def get_config(path: str, name: str | None = None, bindings: list[dict[Any, str]] | None = None,
               cluster: str | None = None, role: str | None = None, env: str | None = None,
               read_json: bool = False) -> JobConfig:
    """Load `path` and return its job with the given key (see the module doc)."""
    loaded = loader.load_json(path) if read_json else loader.load(path)
    index, job = loader.pick(loaded, name, bindings, cluster, role, env)
    return JobConfig(job, loaded.path, index)
