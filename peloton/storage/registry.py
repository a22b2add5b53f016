"""Store URLs -> backends: a registry of backend factories keyed by URL scheme.

Like SQLAlchemy's dialect registry, a backend is found by the scheme of
its URL (`sqlite:///path`, `postgresql://...`, `cassandra://host:port/ks`)
and imported only when first used, so opening a SQLite store never
imports the Cassandra driver.  Extra backends can be registered at start
(`register_backend`), but a scheme can be registered only once: two
backends silently competing for one scheme would be a nightmare to debug.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from urllib.parse import urlsplit, urlunsplit

from peloton.core.errors import InvalidArgument
from peloton.storage.store import Store, StoreOptions

BackendFactory = Callable[[str, StoreOptions], Store]

#: Built-in backends as "module:function", imported lazily.
_BUILTIN: dict[str, str] = {
    "sqlite": "peloton.storage.sql.store:open_sql_store",
    "postgresql": "peloton.storage.sql.store:open_sql_store",
    "postgresql+psycopg": "peloton.storage.sql.store:open_sql_store",
    "cassandra": "peloton.storage.cassandra.store:open_cassandra_store",
}


class BackendRegistry:
    """Maps URL schemes to backend factories."""

    def __init__(self) -> None:
        self._factories: dict[str, BackendFactory | str] = dict(_BUILTIN)

    def register(self, scheme: str, factory: BackendFactory) -> None:
        """Add a backend for `scheme`.  ValueError if the scheme is taken."""
        scheme = scheme.lower()
        if scheme in self._factories:
            raise ValueError(f"a storage backend for {scheme!r} URLs is already registered")
        self._factories[scheme] = factory

    def schemes(self) -> list[str]:
        """Registered URL schemes, sorted."""
        return sorted(self._factories)

    def factory(self, url: str) -> BackendFactory:
        """The factory for `url`'s scheme.  InvalidArgument for an unknown scheme."""
        scheme = urlsplit(url).scheme.lower()
        found = self._factories.get(scheme)
        if found is None:
            raise InvalidArgument(
                f"unknown storage URL scheme {scheme or '(none)'!r} in {redact(url)}; "
                f"use one of: {', '.join(s + '://' for s in self.schemes())}", field="store")
        if isinstance(found, str):
            module, _, name = found.partition(":")
            loaded: BackendFactory = getattr(importlib.import_module(module), name)
            self._factories[scheme] = loaded
            return loaded
        return found

    def open(self, url: str, options: StoreOptions | None = None) -> Store:
        """Open a store; see `open_store`."""
        return self.factory(url)(url, options or StoreOptions())


def redact(url: str) -> str:
    """`url` with any password replaced by ***, for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)
    user = netloc[0].split(":", 1)[0]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc[1]}"))


REGISTRY = BackendRegistry()


def register_backend(scheme: str, factory: BackendFactory) -> None:
    """Register a backend factory for a URL scheme in the process-wide registry."""
    REGISTRY.register(scheme, factory)


def open_store(url: str, options: StoreOptions | None = None) -> Store:
    """Open the store at `url` (`sqlite:///path`, `sqlite://` in memory,
    `postgresql://user@host:port/db`, `cassandra://host:port/keyspace`).

    Opening does not check the schema version: daemons call
    `check_schema(store)` next, and `peloton migrate` opens stores of any
    version.  Raises InvalidArgument for a bad URL, Unavailable if the
    database cannot be reached.
    """
    return REGISTRY.open(url, options)
