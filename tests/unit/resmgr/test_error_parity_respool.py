"""v0 ResourceManager (resource pools): every error case Peloton's handler distinguishes.

Peloton's handler (uber/peloton pkg/resmgr/respool/respoolsvc/handler.go)
answers all of them inside the reply; the table gives the error field and
Peloton's text for each.  Validation texts are ours (they name the field
and the rule), so only their place is checked.
"""

from __future__ import annotations

from typing import Any

import pytest

from peloton.api.gen.peloton.api.v0.respool import respool_pb2
from peloton.resmgr.app import ResourceManager
from peloton.resmgr.servicers import ResourcePoolServicer
from tests.unit.resmgr.helpers import make_pool, singles, tasks


def _config(name: str, parent: str = "root", cpu_limit: float = 10) -> respool_pb2.ResourcePoolConfig:
    cfg = respool_pb2.ResourcePoolConfig(name=name)
    cfg.parent.value = parent
    cfg.resources.add(kind="cpu", reservation=0, limit=cpu_limit, share=1)
    return cfg


def _path(value: str) -> respool_pb2.ResourcePoolPath:
    return respool_pb2.ResourcePoolPath(value=value)


# (name, call, error field, Peloton's text or None when the text is ours)
CASES: list[tuple[str, Any, str, str | None]] = [
    ("create with an invalid config",
     lambda s, ids: s.CreateResourcePool(respool_pb2.CreateRequest(
         config=_config("bad", cpu_limit=-1)), None),
     "error.invalidResourcePoolConfig", None),
    ("create under an unknown parent",
     lambda s, ids: s.CreateResourcePool(respool_pb2.CreateRequest(
         config=_config("orphan", parent="nope")), None),
     "error.invalidResourcePoolConfig", None),
    ("get an unknown pool",
     lambda s, ids: s.GetResourcePool(respool_pb2.GetRequest(id={"value": "nope"}), None),
     "error.notFound", "resource pool not found"),
    ("update an unknown pool",
     lambda s, ids: s.UpdateResourcePool(respool_pb2.UpdateRequest(
         id={"value": "nope"}, config=_config("x")), None),
     "error.notFound", None),
    ("delete an unknown path",
     lambda s, ids: s.DeleteResourcePool(respool_pb2.DeleteRequest(path=_path("/nope")), None),
     "error.notFound", "resource pool not found"),
    ("delete a malformed path",
     lambda s, ids: s.DeleteResourcePool(respool_pb2.DeleteRequest(path=_path("org")), None),
     "error.notFound", "resource pool not found"),
    ("delete a pool with children",
     lambda s, ids: s.DeleteResourcePool(respool_pb2.DeleteRequest(path=_path("/org")), None),
     "error.isNotLeaf", "resource pool is not leaf"),
    ("delete a pool holding tasks",
     lambda s, ids: s.DeleteResourcePool(respool_pb2.DeleteRequest(path=_path("/org/busy")),
                                         None),
     "error.isBusy", "resource pool is busy"),
    ("look up an unknown path",
     lambda s, ids: s.LookupResourcePoolID(respool_pb2.LookupRequest(path=_path("/nope")), None),
     "error.notFound", "resource pool not found"),
    ("look up a malformed path",
     lambda s, ids: s.LookupResourcePoolID(respool_pb2.LookupRequest(path=_path("nope")), None),
     "error.invalidPath", None),
]


@pytest.mark.parametrize(("name", "call", "field", "text"), CASES, ids=[c[0] for c in CASES])
def test_respool_answers_every_error_case_as_peloton(rm: ResourceManager, name: str, call: Any,
                                                     field: str, text: str | None) -> None:
    org = make_pool(rm, "org")
    busy = make_pool(rm, "busy", org)
    rm.enqueue_gangs(busy, singles(tasks(1)))
    servicer = ResourcePoolServicer(lambda: rm.pools)
    reply = call(servicer, {"org": org, "busy": busy})
    node = reply
    for part in field.split("."):
        assert node.HasField(part), (name, reply)
        node = getattr(node, part)
    assert node.message
    if text is not None:
        assert node.message == text, (name, node.message)
