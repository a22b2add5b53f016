"""Contract: the job query, checked by hand on a few cases and against the reference
semantics (peloton/storage/query.py `matches` + `order_and_page`) on many."""

from __future__ import annotations

import dataclasses

import pytest

from peloton.core.errors import InvalidArgument
from peloton.core.model.constraints import Label
from peloton.core.model.job import JobSummary
from peloton.core.states import JobState
from peloton.storage import JobQuery, SortField, Store, TimeRange
from peloton.storage.query import matches, order_and_page
from tests.contract import factories as f

ROWS = [
    # name, owner, pool, labels, state, created, completed, team
    ("web-frontend", "alice", "pool-a", (Label("env", "prod"), Label("tier", "web")),
     JobState.RUNNING, 100.0, 0.0, "search"),
    ("Web-Backend", "bob", "pool-a", (Label("env", "prod"),), JobState.PENDING, 200.0, 0.0, ""),
    ("batch_100%", "alice", "pool-b", (Label("env", "dev"),), JobState.SUCCEEDED, 300.0, 350.0,
     "ml"),
    ("nightly", "carol", "pool-b", (), JobState.FAILED, 400.0, 450.0, ""),
    ("ünïcode-job", "bob", "pool-c", (Label("env", "prod"), Label("tier", "db")),
     JobState.KILLED, 500.0, 520.0, "infra"),
    ("web-frontend", "dave", "pool-a", (), JobState.RUNNING, 200.0, 0.0, ""),
]

QUERIES = [
    JobQuery(),
    JobQuery(states=frozenset({JobState.RUNNING, JobState.PENDING})),
    JobQuery(owner="alice"),
    JobQuery(respool_id="pool-b"),
    JobQuery(labels=(Label("env", "prod"),)),
    JobQuery(labels=(Label("env", "prod"), Label("tier", "db"))),
    JobQuery(labels=(Label("env", "nope"),)),
    JobQuery(name="WEB"),
    JobQuery(name="100%"),
    JobQuery(name="_"),
    JobQuery(name="ÜNÏ"),
    JobQuery(keywords=("prod", "alice")),
    JobQuery(keywords=("tier=web",)),
    JobQuery(keywords=("infra",)),
    JobQuery(creation_time=TimeRange(200.0, 400.0)),
    JobQuery(creation_time=TimeRange(None, 200.0)),
    JobQuery(completion_time=TimeRange(400.0, None)),
    JobQuery(order_by=SortField.NAME, descending=False),
    JobQuery(order_by=SortField.NAME, descending=True),
    JobQuery(order_by=SortField.OWNER, descending=False, limit=2),
    JobQuery(order_by=SortField.STATE, descending=True, offset=1, limit=3),
    JobQuery(order_by=SortField.COMPLETION_TIME, descending=False),
    JobQuery(order_by=SortField.JOB_ID, descending=True, offset=4, limit=10),
    JobQuery(offset=10, limit=5),
    JobQuery(limit=0),
    JobQuery(owner="bob", states=frozenset({JobState.KILLED}), labels=(Label("env", "prod"),),
             name="code", keywords=("infra",), creation_time=TimeRange(500.0, 501.0)),
    # Peloton's owner filter is the owning team; its name filter is case-sensitive.
    JobQuery(owning_team="ml"),
    JobQuery(owning_team=""),
    JobQuery(owning_team="infra", states=frozenset({JobState.KILLED})),
    JobQuery(name="Web"),
    JobQuery(name="web"),
    # A completion range matches only jobs that completed.
    JobQuery(completion_time=TimeRange(None, 460.0)),
    JobQuery(completion_time=TimeRange(0.0, None)),
    # Several sort keys (Peloton's orderBy list), and the fields Peloton sorts by.
    JobQuery(order_by=SortField.NAME, descending=False, then_by=((SortField.CREATION_TIME, True),)),
    JobQuery(order_by=SortField.OWNING_TEAM, descending=False,
             then_by=((SortField.OWNER, True),), limit=4),
    JobQuery(order_by=SortField.RESPOOL_ID, descending=True,
             then_by=((SortField.INSTANCE_COUNT, False), (SortField.NAME, False))),
    JobQuery(order_by=SortField.UPDATE_TIME, descending=False, offset=2),
]


@pytest.fixture
def loaded(store: Store) -> tuple[Store, list[JobSummary]]:
    """A store holding ROWS, and the summaries they should produce."""
    expected = []
    for name, owner, pool, labels, state, created, completed, team in ROWS:
        jid = f.job_id()
        spec = f.job_spec(name, owner=owner, respool=pool, labels=labels, team=team)
        rt = store.create_job(jid, spec, f.job_runtime(JobState.INITIALIZED, created, completed))
        rt = store.update_job_runtime(jid, dataclasses.replace(rt, state=state))
        expected.append(JobSummary(jid, name, spec.type, owner, team, pool, spec.instance_count,
                                   labels, rt, spec.sla))
    return store, expected


@pytest.mark.parametrize("query", QUERIES, ids=[str(i) for i in range(len(QUERIES))])
def test_query_agrees_with_reference(loaded: tuple[Store, list[JobSummary]],
                                     query: JobQuery) -> None:
    store, everything = loaded
    want = order_and_page(query, [j for j in everything if matches(query, j)])
    got = store.query_jobs(query)
    assert got.total == want.total
    assert [j.job_id for j in got.jobs] == [j.job_id for j in want.jobs]
    assert got.jobs == want.jobs


def test_hand_checked_answers(loaded: tuple[Store, list[JobSummary]]) -> None:
    store, _ = loaded
    names = [j.name for j in store.query_jobs(JobQuery(name="web", order_by=SortField.NAME,
                                                       descending=False)).jobs]
    assert names == ["web-frontend", "web-frontend"]  # case-sensitive, as Peloton's
    assert [j.name for j in store.query_jobs(JobQuery(name="Web")).jobs] == ["Web-Backend"]
    two = store.query_jobs(JobQuery(name="web-frontend", order_by=SortField.NAME,
                                    then_by=((SortField.CREATION_TIME, False),))).jobs
    assert [j.runtime.creation_time for j in two] == [100.0, 200.0]
    search = store.query_jobs(JobQuery(owning_team="search"))
    assert [j.owner for j in search.jobs] == ["alice"]
    done = store.query_jobs(JobQuery(completion_time=TimeRange(0.0, 1000.0)))
    assert done.total == 3  # the three that completed, not the running ones (completion 0)
    assert store.query_jobs(JobQuery(name="_")).total == 1  # LIKE wildcards are literal
    prod = store.query_jobs(JobQuery(labels=(Label("env", "prod"),)))
    assert {j.name for j in prod.jobs} == {"web-frontend", "Web-Backend", "ünïcode-job"}
    page = store.query_jobs(JobQuery(order_by=SortField.CREATION_TIME, descending=True,
                                     offset=1, limit=2))
    assert page.total == 6
    assert [j.runtime.creation_time for j in page.jobs] == [400.0, 300.0]
    alice = store.query_jobs(JobQuery(owner="alice", states=frozenset({JobState.RUNNING})))
    assert alice.total == 1
    assert alice.jobs[0].sla.priority == 3
    assert alice.jobs[0].labels == (Label("env", "prod"), Label("tier", "web"))
    assert alice.jobs[0].owning_team == "search"


def test_bad_pagination_is_invalid_argument() -> None:
    with pytest.raises(InvalidArgument):
        JobQuery(offset=-1)
    with pytest.raises(InvalidArgument):
        JobQuery(limit=-5)


def test_jobs_without_owner_pool_or_name_are_stored_found_and_deleted(store: Store) -> None:
    # Cassandra refuses empty partition keys: the backend must still keep such jobs
    # (found by `peloton up --store cassandra://` with a job YAML that names no owner).
    jid, other = f.job_id(), f.job_id()
    store.create_job(jid, f.job_spec("", owner="", respool=""), f.job_runtime())
    store.create_job(other, f.job_spec("named"), f.job_runtime())
    assert [s.job_id for s in store.query_jobs(JobQuery(owner="")).jobs] == [jid]
    assert [s.job_id for s in store.query_jobs(JobQuery(respool_id="")).jobs] == [jid]
    assert store.get_job_ids_by_name("") == [jid]
    spec = f.job_spec("", owner="carol", respool="pool-9", version=2)
    store.add_job_config(jid, spec)
    assert list(store.query_jobs(JobQuery(owner="")).jobs) == []
    assert [s.job_id for s in store.query_jobs(JobQuery(owner="carol")).jobs] == [jid]
    store.delete_job(jid)
    assert store.get_job_ids_by_name("") == []
    assert [s.job_id for s in store.query_jobs(JobQuery()).jobs] == [other]
