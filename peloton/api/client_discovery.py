"""Where the client finds the three daemons: fixed addresses or ZooKeeper leaders.

Peloton's leaders publish their ID JSON at `<root>/<role>/leader` (roles
`jobmanager`, `resourcemanager`, `hostmanager`) and clients dial its
`ip:grpc`.  Reading those znodes is `peloton.common.discovery`'s job (it
also refuses a leader node whose candidates are all gone, so a dead
cluster reads as "no leader", not as an address that never answers);
this module asks it once per role and disconnects.  Resolution is a seam
(`Resolver`), so other coordination backends or tests plug in without
ZooKeeper.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from peloton.common.leader import HOST_MANAGER, JOB_MANAGER, RESOURCE_MANAGER, ROOT

DEFAULT_ZK_ROOT = ROOT
DEFAULT_JOBMGR = "localhost:5392"
DEFAULT_RESMGR = "localhost:5394"
DEFAULT_HOSTMGR = "localhost:5391"

#: Returns the gRPC `host:port` of `role`'s leader; raises Unavailable when there is none.
Resolver = Callable[[str], str]


@dataclass(frozen=True, slots=True)
class Endpoints:
    """gRPC addresses (host:port) of the job, resource and host managers."""

    jobmgr: str = DEFAULT_JOBMGR
    resmgr: str = DEFAULT_RESMGR
    hostmgr: str = DEFAULT_HOSTMGR


def normalize_address(url: str) -> str:
    """`grpc://h:5392/`, `http://h:5392` or `h:5392` → `h:5392` (the original takes URLs)."""
    address = url.strip()
    if "://" in address:
        address = address.split("://", 1)[1]
    address = address.split("/", 1)[0]
    if not address:
        raise ValueError(f"not a host:port address: {url!r}")
    return address


def endpoints_from(resolve: Resolver) -> Endpoints:
    """The three leaders' addresses, one `resolve` per role."""
    return Endpoints(jobmgr=resolve(JOB_MANAGER), resmgr=resolve(RESOURCE_MANAGER),
                     hostmgr=resolve(HOST_MANAGER))


def endpoints_from_zookeeper(servers: Sequence[str], root: str = DEFAULT_ZK_ROOT,
                             *, timeout: float = 10.0) -> Endpoints:
    """Resolve the three leaders from a ZooKeeper ensemble, then disconnect."""
    from kazoo.handlers.threading import KazooTimeoutError

    from peloton.common.discovery import LeaderDiscovery
    from peloton.common.leader import new_client
    from peloton.core.errors import Unavailable

    zk = new_client(servers, session_timeout=max(timeout, 4.0), use_gevent=False)
    try:
        zk.start(timeout=timeout)
    except KazooTimeoutError:
        zk.close()
        raise Unavailable(f"cannot connect to ZooKeeper at {','.join(servers)}") from None

    def resolve(role: str) -> str:
        discovery = LeaderDiscovery(zk, role, root=root)
        discovery.start()
        try:
            return discovery.wait_for_leader(timeout).grpc_address
        finally:
            discovery.stop()

    try:
        return endpoints_from(resolve)
    finally:
        zk.stop()
        zk.close()
