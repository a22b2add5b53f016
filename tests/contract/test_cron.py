"""Contract: cron jobs (create, read, compare-and-set updates, delete) on every backend."""

from __future__ import annotations

import dataclasses

import pytest

from peloton.core.cron.model import CollisionPolicy, CronJob, PendingRun, run_job_id
from peloton.core.errors import AlreadyExists, Conflict, NotFound
from peloton.storage import Store
from tests.contract import factories as f


def cron(name: str) -> CronJob:
    spec = dataclasses.replace(f.job_spec(name=name), document_kind="v1", document=b"\x01\x02")
    return CronJob(name=name, schedule="0 * * * *", policy=CollisionPolicy.KILL_EXISTING,
                   template=spec, created_ms=1_900_000_000_000, last_due_ms=1_900_000_000_000)


def test_cron_jobs_round_trip_and_list_by_name(store: Store) -> None:
    b = store.create_cron_job(cron("www/prod/b"))
    a = store.create_cron_job(cron("www/prod/a"))
    assert (a.revision, b.revision) == (1, 1)
    with pytest.raises(AlreadyExists):
        store.create_cron_job(cron("www/prod/a"))
    assert store.get_cron_job("www/prod/a") == a
    assert [j.name for j in store.get_cron_jobs()] == ["www/prod/a", "www/prod/b"]
    with pytest.raises(NotFound):
        store.get_cron_job("nope")


def test_cron_job_updates_are_compare_and_set(store: Store) -> None:
    job = store.create_cron_job(cron("www/prod/a"))
    pending = PendingRun(run_job_id(job.name, "1"), 1_900_000_060_000, kill_job_id="old-run")
    claimed = store.update_cron_job(dataclasses.replace(job, pending=pending, last_due_ms=pending.due_ms,
                                                        policy=CollisionPolicy.CANCEL_NEW))
    assert claimed.revision == 2 and store.get_cron_job(job.name) == claimed
    with pytest.raises(Conflict):  # a second claimer with the old revision loses
        store.update_cron_job(dataclasses.replace(job, last_due_ms=pending.due_ms))
    assert store.get_cron_job(job.name).pending == pending
    done = store.update_cron_job(dataclasses.replace(claimed, pending=None, last_run_job_id=pending.job_id))
    assert store.get_cron_job(job.name) == done and done.pending is None
    assert store.delete_cron_job(job.name) is True
    assert store.delete_cron_job(job.name) is False
    with pytest.raises(NotFound):
        store.update_cron_job(done)
