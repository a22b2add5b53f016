"""A ZooKeeper-like tree with kazoo's DataWatch and ChildrenWatch recipes, in memory.

Enough of a `KazooClient` for `MemberDirectory` (peloton/common/member_directory.py):
`get`, `ensure_path`, `handler.spawn`/`sleep_func` and the two watch recipes with kazoo's
behaviour (called once at once; then on every change, reading the node *when the event
is delivered*; a DataWatch only when the node's mzxid changed, a ChildrenWatch only when
the children changed; a callback returning False ends its watch).

`hold()` makes watch deliveries run behind (queued until `deliver()`), which is how a
cache goes stale; `during_next_get` runs a function in the middle of the next `get`,
after the value it returns was read (a direct read racing a watch event).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kazoo.exceptions import ConnectionLoss, NoNodeError


@dataclass(frozen=True)
class Stat:
    """The part of a ZnodeStat the recipes and the directory read."""

    czxid: int
    mzxid: int


class _Handler:
    def spawn(self, fn: Callable[..., Any], *args: Any) -> None:
        fn(*args)

    def sleep_func(self, _seconds: float) -> None:
        pass


class _DataWatch:
    def __init__(self, zk: FakeZk, path: str, func: Callable[[bytes | None, Any], Any]) -> None:
        self.zk, self.path, self.func = zk, path, func
        self.stopped = False
        self.version: int | None = None
        self.called = False

    def fire(self) -> None:
        if self.stopped:
            return
        node = self.zk.nodes.get(self.path)
        version = None if node is None else node[1].mzxid
        if self.called and version == self.version:
            return
        self.called, self.version = True, version
        if self.func(None if node is None else node[0], None if node is None else node[1]) \
                is False:
            self.stopped = True


class _ChildrenWatch:
    def __init__(self, zk: FakeZk, path: str, func: Callable[[list[str]], Any]) -> None:
        self.zk, self.path, self.func = zk, path, func
        self.stopped = False
        self.prior: list[str] | None = None

    def fire(self) -> None:
        if self.stopped:
            return
        children = self.zk.children(self.path)
        if children == self.prior:
            return
        self.prior = children
        if self.func(children) is False:
            self.stopped = True


class FakeZk:
    """See the module docstring."""

    def __init__(self) -> None:
        self.nodes: dict[str, tuple[bytes, Stat]] = {}
        self.handler = _Handler()
        self.zxid = 0
        self.gets = 0
        self.unreachable = False
        self.during_next_get: Callable[[], None] | None = None
        self._data_watches: list[_DataWatch] = []
        self._children_watches: list[_ChildrenWatch] = []
        self._held = False
        self._pending: list[Callable[[], None]] = []

    # -- what a test does to the tree -----------------------------------------------------------
    def create(self, path: str, data: bytes = b"") -> None:
        """Create (or re-create) a node; its watches fire."""
        self.zxid += 1
        self.nodes[path] = (data, Stat(self.zxid, self.zxid))
        self._changed(path)

    def delete(self, path: str) -> None:
        """Delete a node; its watches fire."""
        del self.nodes[path]
        self._changed(path)

    def hold(self) -> None:
        """Watch deliveries run behind from now on, until `deliver()`."""
        self._held = True

    def deliver(self) -> None:
        """Deliver every held watch event, in order, and stop holding them."""
        self._held = False
        pending, self._pending = self._pending, []
        for fire in pending:
            fire()

    def watches(self) -> int:
        """Watches still running."""
        return sum(not w.stopped for w in self._data_watches) + \
            sum(not w.stopped for w in self._children_watches)

    def children(self, path: str) -> list[str]:
        """The names of `path`'s children, sorted."""
        prefix = path.rstrip("/") + "/"
        return sorted(p[len(prefix):] for p in self.nodes
                      if p.startswith(prefix) and "/" not in p[len(prefix):])

    # -- the KazooClient surface ----------------------------------------------------------------
    def get(self, path: str) -> tuple[bytes, Stat]:
        """A node's data and stat (NoNodeError; ConnectionLoss while `unreachable`)."""
        self.gets += 1
        if self.unreachable:
            raise ConnectionLoss()
        node = self.nodes.get(path)
        if self.during_next_get is not None:
            racing, self.during_next_get = self.during_next_get, None
            racing()
        if node is None:
            raise NoNodeError()
        return node

    def ensure_path(self, path: str) -> None:
        """Create `path` (and its parents) if missing."""
        parts = [p for p in path.split("/") if p]
        for i in range(1, len(parts) + 1):
            sub = "/" + "/".join(parts[:i])
            if sub not in self.nodes:
                self.create(sub)

    def DataWatch(self, path: str, func: Callable[[bytes | None, Any], Any]) -> _DataWatch:
        """kazoo's DataWatch recipe (called at once, then on each change)."""
        watch = _DataWatch(self, path, func)
        self._data_watches.append(watch)
        watch.fire()
        return watch

    def ChildrenWatch(self, path: str, func: Callable[[list[str]], Any]) -> _ChildrenWatch:
        """kazoo's ChildrenWatch recipe (called at once, then on each change)."""
        if path not in self.nodes:
            raise NoNodeError()
        watch = _ChildrenWatch(self, path, func)
        self._children_watches.append(watch)
        watch.fire()
        return watch

    def _changed(self, path: str) -> None:
        parent = path.rsplit("/", 1)[0] or "/"
        fires = [w.fire for w in self._data_watches if w.path == path]
        fires += [w.fire for w in self._children_watches if w.path == parent]
        for fire in fires:
            if self._held:
                self._pending.append(fire)
            else:
                fire()
