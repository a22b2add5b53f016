"""`make k8s-up`: a local Kubernetes control plane to try `peloton up --backend k8s:...` on.

Starts the same real control plane the tests use (etcd, kube-apiserver with RBAC, kwok for
fake nodes; tests/harness/kube.py) on 127.0.0.1, adds NODES kwok nodes, applies the
namespace and the scheduler's role (docs/deploy/kubernetes/), writes two kubeconfigs into
.k8s/ (`admin.kubeconfig` for you and kubectl, `scheduler.kubeconfig` for peloton, bound to
exactly the scheduler's role) and a `kubectl` of the same version, prints what to run next
and serves until Ctrl-C, which stops every process it started.  kwok's nodes run nothing: a
pod runs until it is deleted, unless its task labels say how it ends (see
tests/harness/kwok_stages.yaml).
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.harness.kube import KubeControlPlane  # noqa: E402  (after the path is set)
from tests.k8s.manifests import scheduler_kubeconfig  # noqa: E402


def main() -> int:
    """Start, print the next steps, wait for Ctrl-C, stop."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=3, help="kwok nodes to add (default 3)")
    parser.add_argument("--dir", default=str(REPO / ".k8s"), help="where state and kubeconfigs go")
    args = parser.parse_args()
    base = Path(args.dir).resolve()
    if base.exists():
        shutil.rmtree(base)
    base.mkdir(parents=True)
    plane = KubeControlPlane(base / "plane").start()
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        names = plane.nodes.add(args.nodes, prefix="node-", cpu="4", memory="16Gi",
                                labels={"zone": "east"})
        plane.nodes.wait_ready(names)
        admin = base / "admin.kubeconfig"
        shutil.copy(plane.admin_kubeconfig, admin)
        scheduler = scheduler_kubeconfig(plane, base / "plane")
        shutil.copy(scheduler, base / "scheduler.kubeconfig")
        kubectl = base / "kubectl"
        kubectl.symlink_to(plane.binary("kubectl"))
        print(f"Kubernetes API server {plane.url} with {args.nodes} kwok nodes: {', '.join(names)}")
        print(f"  admin kubeconfig:     {admin}")
        print(f"  scheduler kubeconfig: {base / 'scheduler.kubeconfig'} (the pelotonpy service account)")
        print(f"  kubectl:              {kubectl}")
        print("In another terminal:")
        print(f"  .venv/bin/peloton up --agents 0 --backend k8s:{base / 'scheduler.kubeconfig'}")
        print(f"  {kubectl} --kubeconfig {admin} get pods -n pelotonpy -o wide")
        print("press Ctrl-C to stop", flush=True)
        stop.wait()
    finally:
        plane.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
