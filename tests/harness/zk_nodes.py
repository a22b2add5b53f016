"""Stand-ins for daemons in the ZooKeeper role tests (tests/integration/test_leader.py and
test_membership.py).

A node has a kazoo client of its own, so a session of its own that a test can expire or
lose, and runs the one component under test on it (a `Candidate`, a `PartitionMember`).
Each test works under a root of its own on the shared server, so tests never see each
other's nodes.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from peloton.common.components import Component
from peloton.common.leader import new_client


class ZkNode:
    """A started kazoo client and the component under test on it, which the subclass sets
    as `component`; `close()` stops the component, then the client."""

    component: Component

    def __init__(self, hosts: str, session_timeout: float, *, use_gevent: bool = False) -> None:
        self.client = new_client(hosts, session_timeout=session_timeout, use_gevent=use_gevent)
        self.client.start(10)

    def close(self) -> None:
        self.component.stop()
        self.client.stop()
        self.client.close()


N = TypeVar("N", bound=ZkNode)


def unique_root() -> str:
    """A ZooKeeper root of one test's own."""
    return f"/test-{uuid.uuid4().hex[:12]}"


@contextlib.contextmanager
def started_nodes(build: Callable[..., N]) -> Iterator[Callable[..., N]]:
    """`make(*args)`: the node `build(*args)` with its component started.  Every node made
    is closed on exit, in the order made."""
    nodes: list[N] = []

    def make(*args: Any, **kwargs: Any) -> N:
        node = build(*args, **kwargs)
        nodes.append(node)
        node.component.start()
        return node

    try:
        yield make
    finally:
        for node in nodes:
            node.close()
