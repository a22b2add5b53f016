"""Contract: a job create is one unit, and storage errors reach callers classified and clean.

Issue 14's findings: a 20,000-character job name failed in PostgreSQL's
index and came back as UNAVAILABLE (so clients retried forever), a name with
NUL came back as INTERNAL carrying the SQL text and its parameters, and both
left orphan task_config rows.  Here the store is driven directly, with
values the API edges would refuse first (peloton/api/limits.py): this is the
net under them.
"""

from __future__ import annotations

import dataclasses
import random

import pytest

from peloton.api.limits import MAX_DESCRIPTION, MAX_LABEL_VALUE, MAX_LABELS, MAX_SHORT
from peloton.core.errors import AlreadyExists, InvalidArgument, NotFound, PelotonError, Unavailable
from peloton.core.model.constraints import Label
from peloton.storage import JobQuery, Store
from tests.contract import factories as f


def _create(store: Store, jid: str, name: str = "job") -> None:
    spec = f.job_spec(name)
    store.create_job_with_tasks(jid, spec, f.job_runtime(), f.task_spec("default"),
                                {2: f.task_spec("two")})


def test_create_with_tasks_stores_both(store: Store) -> None:
    jid = f.job_id()
    _create(store, jid)
    assert store.get_job_config(jid).name == "job"
    configs = store.get_task_configs(jid, 1)
    assert configs.default is not None and set(configs.overrides) == {2}


def test_create_over_an_existing_job_keeps_its_task_configs(store: Store) -> None:
    jid = f.job_id()
    _create(store, jid, "first")
    spec = dataclasses.replace(f.job_spec("second"))
    with pytest.raises(AlreadyExists):
        store.create_job_with_tasks(jid, spec, f.job_runtime(), f.task_spec("other"), {})
    assert store.get_job_config(jid).name == "first"
    assert set(store.get_task_configs(jid, 1).overrides) == {2}


def test_unstorable_name_is_invalid_argument_without_sql_and_leaves_nothing(store: Store) -> None:
    secret = "SECRET-PARAMETER-VALUE"
    # Random hex does not compress: beyond PostgreSQL's btree row limit (2,704 bytes), and,
    # the last one, beyond Cassandra's partition key limit (65,535 bytes: names are keys of
    # the name index).
    for name in (random.Random(14).randbytes(10_000).hex() + secret, f"a\x00b{secret}",
                 random.Random(15).randbytes(35_000).hex() + secret):
        jid = f.job_id()
        try:
            _create(store, jid, name)
        except PelotonError as exc:
            # PostgreSQL refuses all (index row size, NUL in text), Cassandra the longest;
            # SQLite stores anything.
            assert isinstance(exc, InvalidArgument), exc
            assert not isinstance(exc, Unavailable)
            for leak in (secret, "INSERT", "SELECT", "UPDATE", "parameters"):
                assert leak not in exc.message, exc.message
            with pytest.raises(NotFound):
                store.get_task_configs(jid, 1)
            with pytest.raises(NotFound):
                store.get_job_config(jid)
        else:
            assert store.get_job_config(jid).name == name


def test_a_job_at_the_api_maxima_is_stored_and_found(store: Store) -> None:
    # What the fronts let through (peloton/api/limits.py) must fit every backend: on
    # Cassandra, far beyond one batch's 50 KiB (its index and lookup rows are split).
    labels = tuple(Label(f"{i:03d}" + "k" * (MAX_SHORT - 3), "v" * MAX_LABEL_VALUE)
                   for i in range(MAX_LABELS))
    task = dataclasses.replace(f.task_spec("big"), labels=labels)
    spec = dataclasses.replace(f.job_spec("n" * MAX_SHORT, labels=labels), default_task=task,
                               description="d" * MAX_DESCRIPTION)
    jid = f.job_id()
    store.create_job_with_tasks(jid, spec, f.job_runtime(), task, {2: task})
    assert store.get_job_config(jid).labels == labels
    assert store.get_task_configs(jid, 1).overrides[2].labels == labels
    found = store.query_jobs(JobQuery(labels=(labels[-1],)))
    assert [s.job_id for s in found.jobs] == [jid]
    fewer = dataclasses.replace(spec, labels=labels[:1], version=2)
    store.add_job_config(jid, fewer)  # re-indexed: the other labels' lookup rows go
    assert store.query_jobs(JobQuery(labels=(labels[-1],))).jobs == ()
