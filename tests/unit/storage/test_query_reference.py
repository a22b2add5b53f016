"""The reference semantics of job queries (which both backends are checked against)."""

from __future__ import annotations

import pytest

from peloton.core.errors import InvalidArgument
from peloton.core.model.constraints import Label
from peloton.core.model.job import JobRuntime, JobSummary
from peloton.core.states import JobState, JobType
from peloton.storage import JobQuery, SortField, TimeRange
from peloton.storage.query import matches, order_and_page, search_text


def job(job_id: str, name: str = "n", created: float = 0.0, owner: str = "o",
        labels: tuple[Label, ...] = ()) -> JobSummary:
    return JobSummary(job_id, name, JobType.BATCH, owner, "team", "pool", 1, labels,
                      JobRuntime(state=JobState.RUNNING, creation_time=created))


def test_search_text_is_lowercase_and_separated() -> None:
    text = search_text("Web", "Bob", "Infra", [Label("Env", "Prod")])
    assert text == "web\x1fbob\x1finfra\x1fenv=prod"


def test_keywords_match_any_field_but_not_across_fields() -> None:
    j = job("a", name="web", owner="bob", labels=(Label("env", "prod"),))
    assert matches(JobQuery(keywords=("WEB", "env=p")), j)
    assert not matches(JobQuery(keywords=("webbob",)), j)


def test_time_ranges_are_half_open() -> None:
    rng = TimeRange(1.0, 2.0)
    assert rng.contains(1.0) and not rng.contains(2.0)
    assert TimeRange(None, None).contains(-5.0)


def test_ties_keep_job_id_order_in_both_directions() -> None:
    jobs = [job("c", created=1), job("a", created=1), job("b", created=2)]
    desc = order_and_page(JobQuery(order_by=SortField.CREATION_TIME, descending=True), jobs)
    assert [j.job_id for j in desc.jobs] == ["b", "a", "c"]
    asc = order_and_page(JobQuery(order_by=SortField.CREATION_TIME, descending=False), jobs)
    assert [j.job_id for j in asc.jobs] == ["a", "c", "b"]


def test_pages_and_total() -> None:
    jobs = [job(str(i), created=i) for i in range(10)]
    page = order_and_page(JobQuery(offset=3, limit=4, descending=False), jobs)
    assert [j.job_id for j in page.jobs] == ["3", "4", "5", "6"] and page.total == 10
    assert order_and_page(JobQuery(offset=20), jobs).jobs == ()


def test_negative_paging_is_refused() -> None:
    with pytest.raises(InvalidArgument, match="offset"):
        JobQuery(offset=-1)
