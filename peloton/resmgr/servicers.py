"""v0 ResourceManager servicer (`peloton.api.v0.respool.ResourceManager`, also at
`peloton.api.respool.ResourceManager`).

Peloton's handler (pkg/resmgr/respool/respoolsvc/handler.go) reports every
expected failure inside the response, and so does this servicer:

| call   | failure                                   | response error (Peloton's text)          |
|--------|-------------------------------------------|------------------------------------------|
| Create | a validation rule fails                   | invalidResourcePoolConfig                |
| Create | the id is taken in storage                | alreadyExists                            |
| Get    | unknown id                                | notFound "resource pool not found"       |
| Update | unknown id / a validation rule fails      | notFound / invalidResourcePoolConfig     |
| Delete | unknown or malformed path                 | notFound "resource pool not found"       |
| Delete | pool has children                         | isNotLeaf "resource pool is not leaf"    |
| Delete | demand or allocation                      | isBusy "resource pool is busy"           |
| Delete | the root, or storage refused              | notDeleted "<why> resource pool could not be deleted" |
| Lookup | malformed path / unknown path             | invalidPath / notFound "resource pool not found" |

Validation messages are ours: they name the field and the rule
("resources.limit: pool 'a': cpu limit 5 exceeds parent /p limit 4").
tests/unit/resmgr/test_error_parity_respool.py lists every case.  Anything else (storage
down, not leader) is a gRPC status through service_registry's mapping.
Usage shows live allocation per kind: regular tasks as `allocation`,
revocable ones as `slack`, as Peloton does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from peloton.api import peloton_texts as texts
from peloton.api.convert.ext_capacity import above, amounts_to_pb
from peloton.api.convert.v0_respool import (
    respool_config_from_v0,
    respool_info_to_v0,
    respool_path_from_v0,
)
from peloton.api.gen.peloton.api.v0.respool import respool_pb2, respool_pb2_grpc
from peloton.api.gen.pelotonpy.ext import capacity_pb2, capacity_pb2_grpc
from peloton.core.errors import (
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PelotonError,
)
from peloton.core.model.ids import ROOT_POOL_ID, new_id
from peloton.core.model.resources import Resources
from peloton.resmgr.pools import PoolBook, PoolView


def describe(exc: PelotonError) -> str:
    """The message, prefixed by the offending field when the message does not start with it."""
    if exc.field and not exc.message.startswith(exc.field):
        return f"{exc.field}: {exc.message}"
    return exc.message


def info_to_v0(view: PoolView) -> respool_pb2.ResourcePoolInfo:
    """A pool snapshot as v0 ResourcePoolInfo."""
    return respool_info_to_v0(view.pool_id, view.config, path=view.path, children=view.children,
                              allocation=view.allocation, slack=view.slack_allocation)


class ResourcePoolServicer(respool_pb2_grpc.ResourceManagerServicer):  # type: ignore[misc]
    """Resource pool CRUD of Peloton v0 over a `PoolBook`."""

    def __init__(self, pools: Callable[[], PoolBook]) -> None:
        #: The daemon's current PoolBook (it is rebuilt on every start).
        self._book = pools

    def CreateResourcePool(self, request: respool_pb2.CreateRequest,
                           context: Any) -> respool_pb2.CreateResponse:
        out = respool_pb2.CreateResponse()
        pool_id = new_id()
        try:
            self._book().create(respool_config_from_v0(request.config), pool_id)
        except AlreadyExists as exc:
            out.error.alreadyExists.id.value = pool_id
            out.error.alreadyExists.message = describe(exc)
        except (InvalidArgument, FailedPrecondition, NotFound) as exc:
            out.error.invalidResourcePoolConfig.id.value = pool_id
            out.error.invalidResourcePoolConfig.message = describe(exc)
        else:
            out.result.value = pool_id
        return out

    def GetResourcePool(self, request: respool_pb2.GetRequest,
                        context: Any) -> respool_pb2.GetResponse:
        out = respool_pb2.GetResponse()
        pool_id = request.id.value or ROOT_POOL_ID
        book = self._book()
        try:
            out.poolinfo.CopyFrom(info_to_v0(book.get(pool_id)))
            if request.includeChildPools:
                out.childPools.extend(info_to_v0(v) for v in book.children(pool_id))
        except NotFound:
            out.ClearField("poolinfo")
            out.ClearField("childPools")
            out.error.notFound.id.value = pool_id
            out.error.notFound.message = texts.POOL_NOT_FOUND
        return out

    def UpdateResourcePool(self, request: respool_pb2.UpdateRequest,
                           context: Any) -> respool_pb2.UpdateResponse:
        out = respool_pb2.UpdateResponse()
        pool_id = request.id.value
        try:
            if not pool_id:
                raise NotFound("the id of the pool to update must be given", field="id")
            # Force (skip validation) is not honoured: the tree's invariants always hold.
            self._book().update(pool_id, respool_config_from_v0(request.config))
        except NotFound as exc:
            out.error.notFound.id.value = pool_id
            out.error.notFound.message = describe(exc)
        except (InvalidArgument, FailedPrecondition) as exc:
            out.error.invalidResourcePoolConfig.id.value = pool_id
            out.error.invalidResourcePoolConfig.message = describe(exc)
        return out

    def DeleteResourcePool(self, request: respool_pb2.DeleteRequest,
                           context: Any) -> respool_pb2.DeleteResponse:
        out = respool_pb2.DeleteResponse()
        book = self._book()
        try:
            path = respool_path_from_v0(request.path)
            pool_id = book.lookup(path)
        except (InvalidArgument, NotFound):
            out.error.notFound.path.value = request.path.value
            out.error.notFound.message = texts.POOL_NOT_FOUND
            return out
        try:
            book.delete(path)
        except NotFound:  # deleted meanwhile
            out.error.notFound.path.value = request.path.value
            out.error.notFound.message = texts.POOL_NOT_FOUND
        except FailedPrecondition as exc:
            err = out.error.isNotLeaf if exc.field == "children" else out.error.isBusy
            err.id.value = pool_id
            err.message = texts.RESPOOL_NOT_LEAF if exc.field == "children" else texts.RESPOOL_BUSY
        except PelotonError as exc:
            out.error.notDeleted.id.value = pool_id
            out.error.notDeleted.message = f"{exc.message} {texts.RESPOOL_NOT_DELETED}"
        return out

    def LookupResourcePoolID(self, request: respool_pb2.LookupRequest,
                             context: Any) -> respool_pb2.LookupResponse:
        out = respool_pb2.LookupResponse()
        try:
            path = respool_path_from_v0(request.path)
        except InvalidArgument as exc:
            out.error.invalidPath.path.value = request.path.value
            out.error.invalidPath.message = describe(exc)
            return out
        try:
            out.id.value = self._book().lookup(path)
        except NotFound:
            out.error.notFound.path.value = request.path.value
            out.error.notFound.message = texts.POOL_NOT_FOUND
        return out

    def Query(self, request: respool_pb2.QueryRequest, context: Any) -> respool_pb2.QueryResponse:
        out = respool_pb2.QueryResponse()
        out.resourcePools.extend(info_to_v0(v) for v in self._book().all())
        return out


class PoolStatusServicer(capacity_pb2_grpc.PoolStatusServiceServicer):  # type: ignore[misc]
    """pelotonpy.ext.capacity.PoolStatusService: entitlement, demand and queues of every pool."""

    def __init__(self, pools: Callable[[], PoolBook],
                 capacity: Callable[[], tuple[Resources, float]]) -> None:
        self._book = pools
        self._capacity = capacity

    def ListPoolStatus(self, request: Any, context: Any) -> Any:
        capacity, slack = self._capacity()
        out = capacity_pb2.ListPoolStatusResponse(cluster_capacity=amounts_to_pb(capacity),
                                                  slack_cpu=slack)
        for view in self._book().all():
            limit = capacity if view.pool_id == ROOT_POOL_ID else view.limit
            out.pools.append(capacity_pb2.PoolStatus(
                pool_id=view.pool_id, path=view.path,
                reservation=amounts_to_pb(capacity if view.pool_id == ROOT_POOL_ID
                                          else view.reservation),
                limit=amounts_to_pb(limit), entitlement=amounts_to_pb(view.entitlement),
                allocation=amounts_to_pb(view.allocation + view.slack_allocation),
                demand=amounts_to_pb(view.demand), queued_gangs=view.queued_gangs,
                queued_tasks=view.queued_tasks, reserved_for=view.reserved_for,
                leaf=not view.children,
                limit_above_capacity=[] if view.pool_id == ROOT_POOL_ID
                else above(view.limit, capacity)))
        return out
