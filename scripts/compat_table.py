"""Regenerate the README's compatibility tables from the wire manifests and our code.

A method counts as implemented when the servicer class (gRPC) or handler
class (Aurora Thrift) that serves its service defines it (and does not list it
in `UNIMPLEMENTED_AS_PELOTON`: defined only to answer UNIMPLEMENTED with
Peloton's text); everything else answers UNIMPLEMENTED (gRPC) or
INVALID_REQUEST naming the method (Thrift).
`python scripts/compat_table.py` rewrites the block between the
`<!-- compat:begin -->` / `<!-- compat:end -->` markers of README.md;
`--check` exits non-zero if the README is stale (a test runs that).
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
BEGIN, END = "<!-- compat:begin -->", "<!-- compat:end -->"

#: gRPC service -> "module:Class" of the servicer that serves it (absent = not served).
GRPC_SERVICERS: dict[str, str] = {
    "peloton.api.v0.job.JobManager": "peloton.jobmgr.servicers.v0_jobs:JobManagerServicer",
    "peloton.api.v0.task.TaskManager": "peloton.jobmgr.servicers.v0_tasks:TaskManagerServicer",
    "peloton.api.v0.update.svc.UpdateService": "peloton.jobmgr.servicers.v0_updates:UpdateServicer",
    "peloton.api.v0.respool.ResourceManager": "peloton.resmgr.servicers:ResourcePoolServicer",
    "peloton.api.v0.host.svc.HostService": "peloton.hostmgr.servicers:HostServiceServicer",
    "peloton.api.v1alpha.job.stateless.svc.JobService": "peloton.jobmgr.servicers.v1_jobs:JobServicer",
    "peloton.api.v1alpha.pod.svc.PodService": "peloton.jobmgr.servicers.v1_pods:PodServicer",
    "peloton.api.v1alpha.watch.svc.WatchService": "peloton.jobmgr.servicers.watch:WatchServicer",
    "peloton.api.v1alpha.admin.svc.AdminService": "peloton.jobmgr.servicers.admin:AdminServicer",
    "peloton.api.v0.volume.svc.VolumeService": "peloton.jobmgr.servicers.volumes:VolumeServicer",
    "peloton.api.v1alpha.volume.svc.VolumeService":
        "peloton.jobmgr.servicers.volumes:V1VolumeServicer",
}


def _implemented(target: str | None) -> set[str]:
    """Methods the servicer class defines itself (generated base classes excluded)."""
    if not target:
        return set()
    module, _, cls_name = target.partition(":")
    cls = getattr(importlib.import_module(module), cls_name)
    defined = {name for klass in cls.__mro__
               if klass is not object and not klass.__module__.startswith("peloton.api.gen")
               for name, value in vars(klass).items() if callable(value) and name[:1].isupper()}
    # Methods a servicer defines only to answer UNIMPLEMENTED with Peloton's own text.
    return defined - set(getattr(cls, "UNIMPLEMENTED_AS_PELOTON", ()))


def _aurora_supported() -> set[str]:
    """Aurora methods the bridge maps onto Peloton (the rest answer INVALID_REQUEST)."""
    from aurorabridge.handlers import MODULES, unsupported

    return {name for module in MODULES if module is not unsupported for name in module.HANDLERS}


def grpc_rows() -> list[str]:
    """One table row per gRPC service."""
    doc = json.loads((REPO / "tests" / "wire" / "peloton_api.json").read_text())
    rows = ["| gRPC service | implemented | UNIMPLEMENTED |", "|---|---|---|"]
    for svc, methods in doc["services"].items():
        have = _implemented(GRPC_SERVICERS.get(svc))
        done = [m for m in methods if m in have]
        missing = [m for m in methods if m not in have]
        rows.append(f"| `{svc}` | {', '.join(done) or '—'} | {', '.join(missing) or '—'} |")
    return rows


def thrift_rows() -> list[str]:
    """One table row per Aurora Thrift service (its own methods, not inherited ones)."""
    doc = json.loads((REPO / "tests" / "wire" / "aurora_api.json").read_text())
    rows = ["| Aurora service | implemented | answered INVALID_REQUEST (unsupported) |",
            "|---|---|---|"]
    for svc in ("ReadOnlyScheduler", "AuroraSchedulerManager", "AuroraAdmin"):
        methods = list(doc["services"][svc]["methods"])
        have = _aurora_supported()
        done = [m for m in methods if m in have]
        missing = [m for m in methods if m not in have]
        rows.append(f"| `{svc}` | {', '.join(done) or '—'} | {', '.join(missing) or '—'} |")
    return rows


def render() -> str:
    """The generated block (without markers)."""
    return "\n".join(["", *grpc_rows(), "", *thrift_rows(), ""])


def main(argv: list[str]) -> int:
    text = README.read_text()
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    new = f"{head}{BEGIN}\n{render()}\n{END}{tail}"
    if "--check" in argv:
        if new != text:
            print("README.md compatibility tables are stale: run python scripts/compat_table.py")
            return 1
        return 0
    README.write_text(new)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
