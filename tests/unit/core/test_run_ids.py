"""Run ids: the text form round-trips, and the status consumers' parser answers exactly as
`RunId.parse` while remembering job ids only (never one entry per run)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from peloton.core.errors import InvalidArgument
from peloton.core.model.ids import RunId, RunIdParser

uuids = st.uuids().map(str)
texts = st.one_of(
    st.builds(lambda j, i, r: f"{j}-{i}-{r}", uuids.map(str.upper), st.integers(0, 10**6),
              st.integers(0, 10**6)),
    st.text(max_size=60),
    st.builds(lambda j: f"{j}-1-x", uuids))


@given(st.lists(texts, max_size=30), st.integers(1, 4))
def test_parser_answers_as_run_id_parse(ids: list[str], capacity: int) -> None:
    parser = RunIdParser(capacity=capacity)
    for text in ids + ids:  # the second pass is answered from what the first remembered
        try:
            want: RunId | type[InvalidArgument] = RunId.parse(text)
        except InvalidArgument:
            want = InvalidArgument
        if want is InvalidArgument:
            with pytest.raises(InvalidArgument):
                parser.parse(text)
        else:
            assert parser.parse(text) == want
            assert str(parser.parse(text)) == str(want).lower()


def test_parser_remembers_jobs_not_runs() -> None:
    parser = RunIdParser(capacity=2)
    job = "0f8fad5b-d9cb-469f-a165-70867728950e"
    runs = [parser.parse(f"{job}-{i}-1") for i in range(1000)]
    assert len(parser._jobs) == 1
    assert all(r.job_id is runs[0].job_id for r in runs)  # one shared string per job
    for n in range(3):
        parser.parse(f"{job[:-1]}{n}-0-1")
    assert len(parser._jobs) <= 2  # bounded by capacity


def test_a_bad_job_id_is_refused_and_not_remembered() -> None:
    parser = RunIdParser()
    with pytest.raises(InvalidArgument, match="task_id"):
        parser.parse("not-a-uuid-0-1")
    assert parser._jobs == {}
