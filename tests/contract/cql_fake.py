"""An in-memory interpreter of the Cassandra backend's declared CQL statements.

NOT a Cassandra: no replication, no timestamps, no TTL expiry, no
tombstones, one lock around everything.  It exists so that the Cassandra
backend's own logic (index and lookup-table maintenance, LWT result
handling, token-paged scans, create/delete ordering) runs under the same
contract suite as the SQL backends on machines where no Cassandra server
can be installed.  It executes the structured `Cql` values (not text)
against the tables the CQL migrations create, and refuses what a real
server would refuse for these statements: unknown tables or columns,
WHERE on non-key columns, partial partition keys, conditions on keys,
empty partition keys (found by the real-server run).
The real-server run (PELOTON_TEST_CASSANDRA) remains the authority.
"""

from __future__ import annotations

import hashlib
import operator
import threading
from collections.abc import Sequence
from typing import Any

from peloton.storage.cassandra.cql import Cql, Where
from tests.harness import cql_schema
from tests.harness.cql_schema import TableDef

Row = dict[str, Any]
_OPS = {"=": operator.eq, ">": operator.gt, ">=": operator.ge, "<": operator.lt,
        "<=": operator.le}


class CqlRejected(AssertionError):
    """The statement would be refused by Cassandra."""


def _token(pk: tuple[Any, ...]) -> int:
    return int.from_bytes(hashlib.md5(repr(pk).encode()).digest()[:8], "big")


class FakeCqlSession:
    """CqlSession over dicts, for running the backend's logic without a server."""

    def __init__(self, tables: dict[str, TableDef]) -> None:
        self.tables = tables
        self.data: dict[str, dict[tuple[Any, ...], dict[tuple[Any, ...], Row]]] = {
            name: {} for name in tables}
        self._lock = threading.RLock()
        self._prepared: dict[str, Any] = {}

    # -- CqlSession ------------------------------------------------------------
    def execute(self, stmt: Cql, params: Sequence[Any]) -> list[Row]:
        with self._lock:
            return self._run(stmt, list(params))

    def execute_many(self, stmt: Cql, params: Sequence[Sequence[Any]]) -> list[list[Row]]:
        return [self.execute(stmt, p) for p in params]

    def batch(self, items: Sequence[tuple[Cql, Sequence[Any]]]) -> None:
        with self._lock:
            for stmt, params in items:
                if stmt.lwt or stmt.op == "select":
                    raise CqlRejected(f"{stmt.name}: only plain writes may be batched here")
                self._run(stmt, list(params))

    def batch_many(self, batches: Sequence[Sequence[tuple[Cql, Sequence[Any]]]]) -> None:
        for items in batches:
            self.batch(items)

    def cas_batches(self, batches: Sequence[Sequence[tuple[Cql, Sequence[Any]]]]
                    ) -> list[list[Row]]:
        with self._lock:
            return [self._cas_batch(items) for items in batches]

    def _cas_batch(self, items: Sequence[tuple[Cql, Sequence[Any]]]) -> list[Row]:
        """A conditional batch: every condition holds and all apply, or nothing does."""
        seen = []
        for stmt, params in items:
            self._check(stmt, list(params))
            if stmt.op != "update" or not stmt.if_columns:
                raise CqlRejected(f"{stmt.name}: only UPDATE ... IF in a conditional batch here")
            table = self._table(stmt)
            where, rest = self._where(stmt, table, list(params)[len(stmt.columns):])
            keys = {w.columns[0]: v for w, v in where}
            pk, ck = self._key_of(table, keys)
            seen.append((pk, keys, self.data[table.name].get(pk, {}).get(ck),
                         dict(zip(stmt.if_columns, rest, strict=True))))
        if len({pk for pk, *_ in seen}) > 1:
            raise CqlRejected("a conditional batch must stay within one partition")
        if all(row is not None and all(row.get(c) == v for c, v in expected.items())
               for _pk, _keys, row, expected in seen):
            for stmt, params in items:
                self._run(stmt, list(params))
            return [{"[applied]": True}]
        found = [{"[applied]": False, **keys, **{c: row.get(c) for c in expected}}
                 for _pk, keys, row, expected in seen if row is not None]
        return found or [{"[applied]": False}]

    def truncate(self, table: str) -> None:
        with self._lock:
            self.data[table].clear()

    def close(self) -> None:
        """Nothing to release."""

    # -- interpretation ------------------------------------------------------------
    def _table(self, stmt: Cql) -> TableDef:
        table = self.tables.get(stmt.table)
        if table is None:
            raise CqlRejected(f"{stmt.name}: unconfigured table {stmt.table}")
        for col in stmt.columns + stmt.if_columns + tuple(c for w in stmt.where
                                                          for c in w.columns):
            if col not in table.columns:
                raise CqlRejected(f"{stmt.name}: no column {col} in {stmt.table}")
        return table

    def _check(self, stmt: Cql, params: list[Any]) -> None:
        """Refuse what a server would, and serialize the values with the driver."""
        prepared = self._prepared.get(stmt.name)
        if prepared is None:
            problems = cql_schema.check_statement(stmt, self.tables)
            if problems:
                raise CqlRejected(f"{stmt.name}: {'; '.join(problems)}")
            prepared = self._prepared[stmt.name] = cql_schema.prepared(stmt, self.tables)
        prepared.bind(params)  # TypeError if a value does not fit its column's type

    def _run(self, stmt: Cql, params: list[Any]) -> list[Row]:
        self._check(stmt, params)
        table = self._table(stmt)
        if stmt.op == "insert":
            values = dict(zip(stmt.columns, params, strict=False))
            if stmt.ttl and not params[len(stmt.columns)] > 0:
                raise CqlRejected(f"{stmt.name}: TTL must be positive")
            return self._insert(table, values, stmt.if_not_exists)
        if stmt.op == "update" and stmt.ttl:
            params = params[1:]
        sets = dict(zip(stmt.columns, params, strict=False)) if stmt.op == "update" else {}
        rest = params[len(sets):]
        where, rest = self._where(stmt, table, rest)
        if stmt.op == "select":
            rows = self._select(table, where)
            if stmt.limit:
                rows = rows[:rest[0]]
            return [{c: r.get(c) for c in stmt.columns} for r in rows]
        if stmt.op == "delete":
            for pk, ck in [(pk, ck) for pk, ck, _ in self._matches(table, where)]:
                del self.data[table.name][pk][ck]
            return []
        return self._update(stmt, table, where, sets, rest)

    def _where(self, stmt: Cql, table: TableDef,
               params: list[Any]) -> tuple[list[tuple[Where, Any]], list[Any]]:
        out = []
        for w in stmt.where:
            if any(c not in table.key for c in w.columns):
                raise CqlRejected(f"{stmt.name}: WHERE on non-key column {w.columns}")
            n = 1 if w.op == "IN" else len(w.columns)
            value = params[0] if n == 1 and not w.token else tuple(params[:n])
            out.append((w, value))
            params = params[n:]
        for w, value in out:
            if w.op == "=" and not w.token and w.columns[0] in table.partition and value == "":
                raise CqlRejected(f"{stmt.name}: Key may not be empty")
        restricted = {c for w, _ in out if not w.token for c in w.columns}
        if restricted & set(table.partition) and not set(table.partition) <= restricted:
            raise CqlRejected(f"{stmt.name}: partial partition key restriction")
        return out, params

    def _matches(self, table: TableDef,
                 where: list[tuple[Where, Any]]) -> list[tuple[Any, Any, Row]]:
        partitions = sorted(self.data[table.name].items(), key=lambda kv: _token(kv[0]))
        out = []
        for pk, rows in partitions:
            ordered = sorted(rows.items(), key=lambda kv: self._order(table, kv[0]))
            for ck, row in ordered:
                if all(self._holds(table, w, v, row, pk) for w, v in where):
                    out.append((pk, ck, row))
        return out

    @staticmethod
    def _order(table: TableDef, ck: tuple[Any, ...]) -> tuple[Any, ...]:
        key = []
        for col, value in zip(table.clustering, ck, strict=True):
            if col in table.descending:
                key.append(_Desc(value))
            else:
                key.append(value)
        return tuple(key)

    @staticmethod
    def _holds(table: TableDef, w: Where, value: Any, row: Row, pk: tuple[Any, ...]) -> bool:
        if w.token:
            return _token(pk) > _token(tuple(value))
        actual = row[w.columns[0]] if len(w.columns) == 1 else tuple(row[c] for c in w.columns)
        if w.op == "IN":
            return bool(actual in value)
        return bool(_OPS[w.op](actual, value))

    def _select(self, table: TableDef, where: list[tuple[Where, Any]]) -> list[Row]:
        return [row for _, _, row in self._matches(table, where)]

    def _key_of(self, table: TableDef, values: Row) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        if any(values.get(c) is None for c in table.key):
            raise CqlRejected(f"{table.name}: a primary key column is missing or null")
        if any(values[c] in ("", b"") for c in table.partition):
            raise CqlRejected(f"{table.name}: Key may not be empty")  # Cassandra's own words
        return (tuple(values[c] for c in table.partition),
                tuple(values[c] for c in table.clustering))

    def _insert(self, table: TableDef, values: Row, if_not_exists: bool) -> list[Row]:
        pk, ck = self._key_of(table, values)
        part = self.data[table.name].setdefault(pk, {})
        if if_not_exists:
            if ck in part:
                return [{"[applied]": False, **part[ck]}]
            part[ck] = {c: None for c in table.columns} | values
            return [{"[applied]": True}]
        part.setdefault(ck, {c: None for c in table.columns}).update(values)
        return []

    def _update(self, stmt: Cql, table: TableDef, where: list[tuple[Where, Any]],
                sets: Row, if_values: list[Any]) -> list[Row]:
        if any(c in table.key for c in stmt.columns + stmt.if_columns):
            raise CqlRejected(f"{stmt.name}: SET or IF on a primary key column")
        keys = {w.columns[0]: v for w, v in where if w.op == "=" and not w.token}
        pk, ck = self._key_of(table, keys)
        row = self.data[table.name].get(pk, {}).get(ck)
        if stmt.if_exists or stmt.if_columns:
            if row is None:
                return [{"[applied]": False}]
            expected = dict(zip(stmt.if_columns, if_values, strict=True))
            if any(row.get(c) != v for c, v in expected.items()):
                return [{"[applied]": False, **{c: row.get(c) for c in stmt.if_columns}}]
        self.data[table.name].setdefault(pk, {}).setdefault(
            ck, {c: None for c in table.columns} | keys).update(sets)
        return [{"[applied]": True}] if stmt.lwt else []


class _Desc:
    """Reverses the order of a value inside a sort key."""

    __slots__ = ("v",)

    def __init__(self, v: Any) -> None:
        self.v = v

    def __lt__(self, other: _Desc) -> bool:
        return bool(self.v > other.v)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Desc) and self.v == other.v

    def __hash__(self) -> int:
        return hash(self.v)
