"""WatchService and AdminService: the error cases Peloton's handlers distinguish.

Peloton's answers are read from uber/peloton pkg/jobmgr/watchsvc (handler.go,
processor.go) and pkg/jobmgr/adminsvc/handler.go.
"""

from __future__ import annotations

import grpc

from peloton.api.gen.peloton.api.v1alpha.admin.svc import admin_svc_pb2 as admin
from peloton.api.gen.peloton.api.v1alpha.watch.svc import watch_svc_pb2 as watch
from tests.unit.jobmgr_servicers.conftest import Cluster
from tests.unit.jobmgr_servicers.parity import Case, check

S = grpc.StatusCode

CASES = [
    Case("watch without a filter",
         lambda c, ids: next(c.watch.Watch(watch.WatchRequest(), timeout=10)),
         code=S.INVALID_ARGUMENT, message="not supported watch type"),
    Case("cancel a pod watch that does not exist",
         lambda c, ids: c.watch.Cancel(watch.CancelRequest(watch_id="task_nope"), timeout=10),
         code=S.NOT_FOUND, message="watch_id task_nope not exist for task watch client"),
    Case("cancel an id that names no watch",
         lambda c, ids: c.watch.Cancel(watch.CancelRequest(watch_id="nope"), timeout=10),
         code=S.NOT_FOUND, message="invalid watch id"),
    # 99 names no Component: the ignores below pass an unknown number on purpose.
    Case("lock down an unknown component",
         lambda c, ids: c.admin.Lockdown(admin.LockdownRequest(components=[99]),  # type: ignore[list-item]
                                         timeout=10),
         code=S.INVALID_ARGUMENT, message="unknown component: 99"),
    Case("remove the lockdown of an unknown component",
         lambda c, ids: c.admin.RemoveLockdown(admin.RemoveLockdownRequest(components=[99]),  # type: ignore[list-item]
                                               timeout=10),
         code=S.INVALID_ARGUMENT, message="unknown component: 99"),
]


def test_watch_and_admin_answer_every_error_case_as_peloton(cluster: Cluster) -> None:
    for case in CASES:
        check(case, cluster, {})
