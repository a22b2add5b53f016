"""The Cassandra schema the CQL migrations build, read from migrations/cql/ without a server.

A small parser for the statements those files use (CREATE TABLE with
inline or separate PRIMARY KEY and WITH CLUSTERING ORDER / default TTL,
DROP TABLE).  Applying every `up` file in order gives the tables the
backend may use; tests check statements against them and the CQL fake
(tests/contract/cql_fake.py) executes against them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from cassandra import cqltypes
from cassandra.protocol import ColumnMetadata
from cassandra.query import PreparedStatement

from migrations.cql_runner import migrations
from peloton.storage.cassandra.cql import Cql
from peloton.storage.cassandra.schema import MIGRATIONS_TABLE_CQL

_CREATE = re.compile(r"^CREATE TABLE IF NOT EXISTS (\w+) \(", re.I)
_DROP = re.compile(r"^DROP TABLE IF EXISTS (\w+)$", re.I)


@dataclass
class TableDef:
    """One table: column types, partition key, clustering columns and their order."""

    name: str
    columns: dict[str, str] = field(default_factory=dict)
    partition: tuple[str, ...] = ()
    clustering: tuple[str, ...] = ()
    descending: frozenset[str] = frozenset()
    default_ttl: int = 0

    @property
    def key(self) -> tuple[str, ...]:
        """Primary key columns."""
        return self.partition + self.clustering


def _split_top(text: str) -> list[str]:
    """Split on commas outside parentheses and angle brackets."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch in "(<":
            depth += 1
        elif ch in ")>":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


def parse_create(stmt: str) -> TableDef:
    """A TableDef from one CREATE TABLE statement."""
    m = _CREATE.match(stmt.strip())
    if m is None:
        raise ValueError(f"not a CREATE TABLE statement: {stmt[:80]}")
    table = TableDef(m.group(1))
    text = stmt.strip()
    start = text.index("(")
    depth, end = 0, start
    for end in range(start, len(text)):  # the parenthesis closing the column list
        depth += {"(": 1, ")": -1}.get(text[end], 0)
        if depth == 0:
            break
    body, options = text[start + 1:end], text[end + 1:]
    for part in _split_top(body):
        words = part.split()
        if words[0].upper() == "PRIMARY":
            inner = part[part.index("(") + 1:part.rindex(")")]
            keys = _split_top(inner)
            first = keys[0]
            table.partition = (tuple(c.strip() for c in first.strip("()").split(","))
                               if first.startswith("(") else (first,))
            table.clustering = tuple(k.strip() for k in keys[1:])
        else:
            table.columns[words[0]] = words[1].lower()
            if len(words) > 2 and " ".join(words[2:]).upper() == "PRIMARY KEY":
                table.partition = (words[0],)
    order = re.search(r"CLUSTERING ORDER BY \(([^)]*)\)", options, re.I)
    if order:
        table.descending = frozenset(
            c.split()[0] for c in order.group(1).split(",") if c.split()[1].upper() == "DESC")
    ttl = re.search(r"default_time_to_live\s*=\s*(\d+)", options, re.I)
    table.default_ttl = int(ttl.group(1)) if ttl else 0
    if not table.partition:
        raise ValueError(f"table {table.name} has no primary key")
    return table


def schema(upto: str | None = None) -> dict[str, TableDef]:
    """Tables after applying every up migration (up to version `upto`), plus the
    migration runner's own table."""
    tables: dict[str, TableDef] = {}
    for stmt in (MIGRATIONS_TABLE_CQL,):
        t = parse_create(stmt)
        tables[t.name] = t
    for m in migrations():
        if upto is not None and m.version > upto:
            break
        for stmt in m.up:
            if stmt.upper().startswith("CREATE TABLE"):
                t = parse_create(stmt)
                tables[t.name] = t
            elif (d := _DROP.match(stmt)) is not None:
                tables.pop(d.group(1), None)
            else:
                raise ValueError(f"migration {m.version}: unsupported statement {stmt[:60]}")
    return tables


def tables_after_down(version: str) -> set[str]:
    """Table names left after applying every up and then the downs back to `version`."""
    names = set(schema())
    for m in reversed(migrations()):
        if m.version <= version:
            break
        for stmt in m.down:
            if (d := _DROP.match(stmt)) is not None:
                names.discard(d.group(1))
    return names


# -- checking statements against the schema, as Cassandra would -----------------------

def check_statement(stmt: Cql, tables: dict[str, TableDef]) -> list[str]:
    """What Cassandra would refuse in `stmt` (an empty list if nothing)."""
    table = tables.get(stmt.table)
    if table is None:
        return [f"unknown table {stmt.table}"]
    problems = [f"unknown column {c}" for c in
                (*stmt.columns, *stmt.if_columns, *(c for w in stmt.where for c in w.columns))
                if c not in table.columns]
    if problems:
        return problems
    if stmt.op == "insert":
        missing = [c for c in table.key if c not in stmt.columns]
        return [f"INSERT lacks key column {c}" for c in missing]
    pk_eq = {c for w in stmt.where if not w.token and w.op in ("=", "IN") for c in w.columns
             if c in table.partition}
    tokens = [w for w in stmt.where if w.token]
    for w in stmt.where:
        if any(c not in table.key for c in w.columns):
            problems.append(f"WHERE on non-key column {w.columns} needs ALLOW FILTERING")
    if tokens and tokens[0].columns != table.partition:
        problems.append("token() must name the whole partition key in order")
    if pk_eq and pk_eq != set(table.partition):
        problems.append("partition key only partly restricted")
    ck_where = [w for w in stmt.where if not w.token and w.columns[0] in table.clustering]
    if ck_where and pk_eq != set(table.partition):
        problems.append("clustering restriction without the partition key")
    seen_range = False
    for i, col in enumerate(table.clustering):
        ops = [w.op for w in ck_where if w.columns[0] == col]
        if ops and seen_range:
            problems.append(f"{col} restricted after a range on an earlier column")
        if any(op != "=" for op in ops):
            seen_range = True
        if not ops and any(w.columns[0] in table.clustering[i + 1:] for w in ck_where):
            problems.append(f"clustering column {col} skipped")
    if stmt.op == "update":
        eq_cols = {w.columns[0] for w in stmt.where if w.op == "=" and not w.token}
        if eq_cols != set(table.key):
            problems.append("UPDATE must give the whole primary key with =")
        if any(c in table.key for c in stmt.columns + stmt.if_columns):
            problems.append("SET / IF on a primary key column")
    if stmt.op == "delete":
        if pk_eq != set(table.partition) or tokens:
            problems.append("DELETE must give the whole partition key")
        if stmt.lwt and any(w.op != "=" for w in stmt.where):
            problems.append("conditional DELETE of a range")
    return problems


_SIMPLE = {"text": cqltypes.UTF8Type, "int": cqltypes.Int32Type, "bigint": cqltypes.LongType,
           "double": cqltypes.DoubleType, "boolean": cqltypes.BooleanType,
           "timestamp": cqltypes.DateType}


def cql_type(name: str) -> Any:
    """The driver's type class for a CQL type name."""
    return _SIMPLE[name]


def prepared(stmt: Cql, tables: dict[str, TableDef], keyspace: str = "peloton") -> Any:
    """A driver PreparedStatement for `stmt`, with the bind metadata a server would send,
    so values can be bound and serialized exactly as they would be for a real server."""
    table = tables[stmt.table]
    meta = []
    for bind in stmt.binds:
        if bind in ("[limit]", "[ttl]"):
            meta.append(ColumnMetadata(keyspace, table.name, bind, cqltypes.Int32Type))
        elif bind.endswith("[]"):
            inner = cql_type(table.columns[bind[:-2]])
            meta.append(ColumnMetadata(keyspace, table.name, bind[:-2],
                                       cqltypes.ListType.apply_parameters([inner])))
        else:
            meta.append(ColumnMetadata(keyspace, table.name, bind,
                                       cql_type(table.columns[bind])))
    routing = None
    if all(c in stmt.binds for c in table.partition):
        routing = [stmt.binds.index(c) for c in table.partition]
    return PreparedStatement(meta, b"\x01" * 16, routing, stmt.text, keyspace, 4, None, None)
