"""The Cassandra backend keeps batches single-partition and under Cassandra's size limit."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from peloton.core.model.task import CommandSpec, TaskRuntime, TaskSpec
from peloton.storage import StoreOptions
from peloton.storage.cassandra.cql import Cql
from peloton.storage.cassandra.store import CassandraStore
from tests.contract.cql_fake import FakeCqlSession
from tests.harness import cql_schema


class Recording(FakeCqlSession):
    """Remembers every batch it applies."""

    def __init__(self) -> None:
        super().__init__(cql_schema.schema())
        self.batches: list[list[tuple[Cql, Sequence[Any]]]] = []

    def batch(self, items: Sequence[tuple[Cql, Sequence[Any]]]) -> None:
        self.batches.append(list(items))
        super().batch(items)


def test_big_task_configs_are_split_into_small_single_partition_batches() -> None:
    session = Recording()
    store = CassandraStore("cassandra://fake/ks", session, StoreOptions())
    big = TaskSpec(command=CommandSpec("x" * 3000))  # ~4 KB of JSON each
    store.create_task_configs("job", 1, big, {i: big for i in range(60)})
    assert len(store.get_task_configs("job", 1).overrides) == 60
    for batch in session.batches:
        assert {(p[0], p[1]) for _, p in batch} == {("job", 1)}  # one partition
        assert sum(len(p[3]) for _, p in batch) < 30_000  # far below the 50 KB refusal
    assert len(session.batches) > 5


def test_runtimes_go_in_batches_of_at_most_forty_rows() -> None:
    session = Recording()
    store = CassandraStore("cassandra://fake/ks", session, StoreOptions())
    store.create_task_runtimes("job", {i: TaskRuntime() for i in range(100)})
    assert [len(b) for b in session.batches] == [40, 40, 20]
    assert len(store.get_task_runtimes("job")) == 100
