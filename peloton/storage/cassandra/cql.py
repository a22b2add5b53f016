"""CQL statements as values: the text to prepare plus what each bind marker means.

Every statement the Cassandra backend runs is declared once in
statements.py with these builders, never as free text.  That keeps the
CQL uniform (plain CQL 3 as Cassandra 3.11, 4.x and 5.x accept it: no
materialized views, no SASI, no ALLOW FILTERING) and lets tests check
each statement against the tables the CQL migrations create, and bind
values to it with the driver, without a server (see
tests/unit/storage/test_cql_statements.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Where:
    """One restriction: `col op ?`, `(a, b) op (?, ?)`, or `token(a, b) op token(?, ?)`."""

    columns: tuple[str, ...]
    op: str = "="
    token: bool = False

    def text(self) -> str:
        """The restriction as CQL."""
        cols = ", ".join(self.columns)
        marks = ", ".join("?" for _ in self.columns)
        if self.token:
            return f"token({cols}) {self.op} token({marks})"
        if self.op == "IN":
            return f"{cols} IN ?"
        if len(self.columns) > 1:
            return f"({cols}) {self.op} ({marks})"
        return f"{cols} {self.op} ?"

    def binds(self) -> tuple[str, ...]:
        """What each bind marker of the restriction holds ("col" or "col[]" for IN lists)."""
        if self.op == "IN":
            return (self.columns[0] + "[]",)
        return self.columns


def eq(*columns: str) -> tuple[Where, ...]:
    """Equality restrictions on each column."""
    return tuple(Where((c,)) for c in columns)


@dataclass(frozen=True, slots=True)
class Cql:
    """One prepared statement.

    `op` is select / insert / update / delete.  `columns` are the selected
    columns, the inserted ones, or the SET ones.  `if_columns` make an
    update a lightweight transaction (`IF a = ? AND ...`); `if_not_exists`
    / `if_exists` are the other LWT forms.  `limit` and `ttl` add a bound
    `LIMIT ?` / `USING TTL ?`.  `count` selects COUNT(*).
    """

    name: str
    op: str
    table: str
    columns: tuple[str, ...] = ()
    where: tuple[Where, ...] = ()
    if_columns: tuple[str, ...] = ()
    if_not_exists: bool = False
    if_exists: bool = False
    limit: bool = False
    ttl: bool = False
    count: bool = False
    text: str = field(init=False)
    binds: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        text, binds = self._render()
        object.__setattr__(self, "text", text)
        object.__setattr__(self, "binds", binds)

    @property
    def lwt(self) -> bool:
        """A lightweight transaction (its result has an `[applied]` column)."""
        return bool(self.if_columns) or self.if_not_exists or self.if_exists

    def _render(self) -> tuple[str, tuple[str, ...]]:
        where = " AND ".join(w.text() for w in self.where)
        where_binds = tuple(b for w in self.where for b in w.binds())
        if self.op == "select":
            cols = "COUNT(*)" if self.count else ", ".join(self.columns)
            text = f"SELECT {cols} FROM {self.table}"
            text += f" WHERE {where}" if where else ""
            text += " LIMIT ?" if self.limit else ""
            return text, where_binds + (("[limit]",) if self.limit else ())
        if self.op == "insert":
            cols = ", ".join(self.columns)
            marks = ", ".join("?" for _ in self.columns)
            text = f"INSERT INTO {self.table} ({cols}) VALUES ({marks})"
            text += " IF NOT EXISTS" if self.if_not_exists else ""
            text += " USING TTL ?" if self.ttl else ""
            return text, self.columns + (("[ttl]",) if self.ttl else ())
        if self.op == "update":
            sets = ", ".join(f"{c} = ?" for c in self.columns)
            using = " USING TTL ?" if self.ttl else ""
            text = f"UPDATE {self.table}{using} SET {sets} WHERE {where}"
            if self.if_columns:
                text += " IF " + " AND ".join(f"{c} = ?" for c in self.if_columns)
            elif self.if_exists:
                text += " IF EXISTS"
            ttl = ("[ttl]",) if self.ttl else ()
            return text, ttl + self.columns + where_binds + self.if_columns
        if self.op == "delete":
            text = f"DELETE FROM {self.table} WHERE {where}"
            text += " IF EXISTS" if self.if_exists else ""
            return text, where_binds
        raise ValueError(f"unknown CQL operation {self.op!r}")


def select(name: str, table: str, columns: tuple[str, ...], *where: Where,
           limit: bool = False, count: bool = False) -> Cql:
    """A SELECT."""
    return Cql(name, "select", table, columns, where, limit=limit, count=count)


def insert(name: str, table: str, columns: tuple[str, ...], *, if_not_exists: bool = False,
           ttl: bool = False) -> Cql:
    """An INSERT (an upsert unless `if_not_exists`)."""
    return Cql(name, "insert", table, columns, if_not_exists=if_not_exists, ttl=ttl)


def update(name: str, table: str, columns: tuple[str, ...], *where: Where,
           if_columns: tuple[str, ...] = (), if_exists: bool = False) -> Cql:
    """An UPDATE, conditional with `if_columns` or `if_exists`."""
    return Cql(name, "update", table, columns, where, if_columns=if_columns,
               if_exists=if_exists)


def delete(name: str, table: str, *where: Where) -> Cql:
    """A DELETE of a row, a partition or a clustering range."""
    return Cql(name, "delete", table, (), where)
