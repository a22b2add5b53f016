"""docs/deploy/kubernetes/: every manifest is accepted by a real v1.34 API server, and the
scheduler's ServiceAccount may do exactly what rbac.yaml says, nothing more.

The manifests are sent as a server-side dry run (validation and admission, nothing stored), after
namespace.yaml and rbac.yaml were applied for real; the account's permissions are asked of the
API server itself (SelfSubjectAccessReview, signed in with the account's own token) over a matrix
of resources, verbs and namespaces, and a few real calls show the answers hold.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from peloton.cluster.daemons.config import SCHEMAS, HostmgrProcessConfig, load
from peloton.common.config import from_mapping
from peloton.hostmgr.backends.k8s_config import KubeConfig
from tests.harness.kube import KubeControlPlane
from tests.k8s.manifests import (
    MANIFESTS,
    NAMESPACE,
    SERVICE_ACCOUNT,
    Json,
    apply,
    call,
    collection_path,
    describe,
    load_manifests,
    scheduler_kubeconfig,
)

FILES = sorted(p.name for p in MANIFESTS.glob("*.yaml"))
#: The API groups the manifests may use: stable ones only (all served by v1.34).
STABLE_APIS = {"v1", "apps/v1", "batch/v1", "rbac.authorization.k8s.io/v1"}
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding"}
#: Secrets the guide tells users to create (never committed with a value).
USER_SECRETS = {"pelotonpy-auth", "pelotonpy-postgres"}
#: A namespace that is not ours (it always exists).
OTHER = "default"


def test_the_manifests_are_there() -> None:
    assert FILES == ["daemons.yaml", "namespace.yaml", "peloton-up.yaml", "rbac.yaml"]


# -- the files themselves --------------------------------------------------------------------------
def _pod_specs(obj: Json) -> list[Json]:
    spec = obj.get("spec") or {}
    if obj["kind"] in ("Deployment", "StatefulSet", "Job"):
        return [spec["template"]]
    return []


def test_objects_use_stable_apis_and_name_their_namespace() -> None:
    seen: dict[tuple[str, str, str], str] = {}
    for name in FILES:
        for obj in load_manifests(MANIFESTS / name):
            assert obj["apiVersion"] in STABLE_APIS, f"{name}: {describe(obj)}: {obj['apiVersion']}"
            namespace = obj["metadata"].get("namespace")
            if obj["kind"] in CLUSTER_SCOPED:
                assert namespace is None, f"{name}: {describe(obj)} is cluster-scoped"
            else:
                # kubectl would put an object without one in the current context's namespace.
                assert namespace == NAMESPACE, f"{name}: {describe(obj)} names no namespace"
            key = (obj["kind"], namespace or "", obj["metadata"]["name"])
            # peloton-up.yaml and daemons.yaml never overwrite each other's objects.
            assert key not in seen, f"{describe(obj)} is in both {seen[key]} and {name}"
            seen[key] = name


def test_the_schedulers_own_pods_are_never_taken_for_task_pods() -> None:
    for obj in load_manifests(MANIFESTS):
        for template in _pod_specs(obj):
            labels = template["metadata"].get("labels") or {}
            annotations = template["metadata"].get("annotations") or {}
            # The backend adopts a pod carrying pelotonpy.dev/cluster and a run id.
            assert not [k for k in (*labels, *annotations) if k.startswith("pelotonpy.dev/")], describe(obj)


def test_only_the_host_manager_gets_an_api_token() -> None:
    sa = next(o for o in load_manifests(MANIFESTS / "rbac.yaml") if o["kind"] == "ServiceAccount")
    assert sa["automountServiceAccountToken"] is False
    with_token = set()
    for obj in load_manifests(MANIFESTS):
        for template in _pod_specs(obj):
            spec = template["spec"]
            if spec.get("serviceAccountName") == SERVICE_ACCOUNT:
                assert spec.get("automountServiceAccountToken") is True, describe(obj)
                with_token.add(obj["metadata"]["name"])
            else:
                assert spec.get("serviceAccountName") is None, describe(obj)
                assert spec.get("automountServiceAccountToken") is False, describe(obj)
    assert with_token == {"pelotonpy", "pelotonpy-hostmgr"}


def test_referenced_configmaps_are_in_the_same_file_and_secrets_are_the_documented_ones() -> None:
    for name in ("peloton-up.yaml", "daemons.yaml"):
        objects = load_manifests(MANIFESTS / name)
        configmaps = {o["metadata"]["name"] for o in objects if o["kind"] == "ConfigMap"}
        for obj in objects:
            for template in _pod_specs(obj):
                spec = template["spec"]
                for volume in spec.get("volumes") or ():
                    if "configMap" in volume:
                        assert volume["configMap"]["name"] in configmaps, f"{name}: {describe(obj)}"
                    if "secret" in volume:
                        assert volume["secret"]["secretName"] in USER_SECRETS, f"{name}: {describe(obj)}"
                for container in (*spec.get("initContainers", ()), *spec["containers"]):
                    for env in container.get("env") or ():
                        ref = (env.get("valueFrom") or {}).get("secretKeyRef")
                        if ref:
                            assert ref["name"] in USER_SECRETS, f"{name}: {describe(obj)}"


def _config_maps(name: str) -> dict[str, str]:
    """file name -> text of every ConfigMap file in a manifest file."""
    out: dict[str, str] = {}
    for obj in load_manifests(MANIFESTS / name):
        if obj["kind"] == "ConfigMap":
            out.update(obj["data"])
    return out


def test_daemon_configs_load_with_their_daemons_schemas(tmp_path: Path) -> None:
    files = _config_maps("daemons.yaml")
    assert sorted(files) == ["hostmgr.yaml", "jobmgr.yaml", "placement.yaml", "resmgr.yaml"]
    for file, text in files.items():
        role = file.removesuffix(".yaml")
        path = tmp_path / file
        path.write_text(text)
        # The Deployments set PELOTON_GRPC_ADVERTISE to the pod's IP.
        config = load(SCHEMAS[role], [path], env={"PELOTON_GRPC_ADVERTISE": "10.1.2.3"})
        assert config.election.zk_servers == ("zookeeper:2181",), role
        assert config.grpc.host == "0.0.0.0" and config.grpc.advertise == "10.1.2.3", role
        assert config.security.auth == "/etc/pelotonpy/users.yaml", role
        if role != "placement":
            assert config.storage.url == "postgresql://pelotonpy@postgres:5432/pelotonpy", role
            assert config.storage.bootstrap is False, role  # the schema Job makes it
        if isinstance(config, HostmgrProcessConfig):
            assert config.backend == "k8s:in-cluster"
            # Written out for the reader; they are the defaults.
            assert config.kubernetes == KubeConfig()


def test_the_settings_file_of_peloton_up_lists_the_defaults() -> None:
    settings = yaml.safe_load(_config_maps("peloton-up.yaml")["kubernetes.yaml"])
    assert from_mapping(KubeConfig, settings, "kubernetes") == KubeConfig()
    every_key = {name for name in KubeConfig.__dataclass_fields__ if name not in ("source", "context")}
    assert set(settings) == every_key


# -- the API server ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def scheduler(kube: KubeControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """An ApiClient signed in as the scheduler's ServiceAccount (namespace.yaml and rbac.yaml
    applied for real)."""
    api = kube.client_for(scheduler_kubeconfig(kube, tmp_path_factory.mktemp("scheduler")))
    try:
        yield api
    finally:
        api.close()


@pytest.mark.parametrize("name", FILES)
def test_every_manifest_passes_a_server_side_dry_run(kube: KubeControlPlane, scheduler: Any,
                                                     name: str) -> None:
    objects = load_manifests(MANIFESTS / name)
    answers = apply(kube.api(), objects, dry_run=True)
    assert [(a["kind"], a["metadata"]["name"]) for a in answers] == [
        (o["kind"], o["metadata"]["name"]) for o in objects]
    if name in ("namespace.yaml", "rbac.yaml"):
        return  # applied for real by the fixture
    for obj in objects:
        path = f"{collection_path(kube.api(), obj)}/{obj['metadata']['name']}"
        status, _ = call(kube.api(), "GET", path)
        assert status == 404, f"the dry run stored {describe(obj)}"


def _allowed(api: Any, namespace: str, group: str, resource: str, subresource: str, verb: str) -> bool:
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
              "spec": {"resourceAttributes": {"namespace": namespace, "verb": verb, "group": group,
                                              "resource": resource, "subresource": subresource}}}
    status, answer = call(api, "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                          body=review)
    assert status == 201, answer
    return bool(answer["status"].get("allowed"))


VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")
#: (group, resource, subresource): what the account may touch and, around it, what it may not.
RESOURCES = (
    ("", "nodes", ""), ("", "nodes", "status"), ("", "nodes", "proxy"),
    ("", "pods", ""), ("", "pods", "binding"), ("", "pods", "log"), ("", "pods", "status"),
    ("", "pods", "exec"), ("", "pods", "attach"), ("", "pods", "eviction"),
    ("", "pods", "ephemeralcontainers"),
    ("", "events", ""), ("events.k8s.io", "events", ""),
    ("", "secrets", ""), ("", "configmaps", ""), ("", "services", ""), ("", "endpoints", ""),
    ("", "namespaces", ""), ("", "serviceaccounts", ""), ("", "serviceaccounts", "token"),
    ("", "persistentvolumeclaims", ""), ("", "persistentvolumes", ""),
    ("storage.k8s.io", "storageclasses", ""), ("apps", "deployments", ""), ("batch", "jobs", ""),
    ("coordination.k8s.io", "leases", ""), ("rbac.authorization.k8s.io", "roles", ""),
    ("rbac.authorization.k8s.io", "rolebindings", ""), ("rbac.authorization.k8s.io", "clusterroles", ""),
    ("rbac.authorization.k8s.io", "clusterrolebindings", ""),
)


def _granted(namespace: str, group: str, resource: str, subresource: str, verb: str) -> bool:
    """What rbac.yaml grants (written out again here, so a change to it must be made twice)."""
    if (group, resource, subresource) == ("", "nodes", ""):  # ClusterRole: any namespace
        return verb in ("get", "list", "watch", "patch")
    if (group, resource, subresource) == ("", "pods", "") and verb in ("get", "list", "watch"):
        return True  # ClusterRole: every namespace, and all namespaces at once ("")
    if namespace != NAMESPACE:
        return False
    return (group, resource, subresource, verb) in {
        ("", "pods", "", "create"), ("", "pods", "", "delete"), ("", "pods", "binding", "create"),
        ("", "pods", "log", "get"), ("", "events", "", "create"),
        *(("", "services", "", verb) for verb in ("create", "get", "delete", "list")),
        *(("", "persistentvolumeclaims", "", verb) for verb in ("create", "get", "delete"))}


def test_the_scheduler_account_may_do_exactly_what_rbac_yaml_grants(scheduler: Any) -> None:
    wrong = []
    for namespace in (NAMESPACE, OTHER, ""):
        for group, resource, subresource in RESOURCES:
            for verb in VERBS:
                allowed = _allowed(scheduler, namespace, group, resource, subresource, verb)
                if allowed != _granted(namespace, group, resource, subresource, verb):
                    what = f"{group or 'core'}/{resource}{'/' + subresource if subresource else ''}"
                    wrong.append(f"{verb} {what} in {namespace or 'all namespaces'}: "
                                 f"{'allowed' if allowed else 'denied'}")
    assert not wrong, "\n".join(wrong)


def _pod(namespace: str) -> Json:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "rbac-probe", "namespace": namespace},
            "spec": {"nodeName": "no-such-node", "schedulerName": "pelotonpy", "restartPolicy": "Never",
                     "containers": [{"name": "task", "image": "busybox:1.36"}]}}


def test_the_scheduler_accounts_real_calls_get_those_answers(scheduler: Any) -> None:
    assert call(scheduler, "GET", "/api/v1/nodes", [("limit", "1")])[0] == 200
    assert call(scheduler, "GET", "/api/v1/pods", [("fieldSelector", "spec.nodeName!="),
                                                   ("limit", "1")])[0] == 200
    dry = [("dryRun", "All")]
    # Creating a pod: in our namespace yes (a dry run: nothing is left behind), elsewhere no.
    assert call(scheduler, "POST", f"/api/v1/namespaces/{NAMESPACE}/pods", dry, _pod(NAMESPACE))[0] == 201
    assert call(scheduler, "POST", f"/api/v1/namespaces/{OTHER}/pods", dry, _pod(OTHER))[0] == 403
    # Authorization comes before the lookup: a 403 here is the refusal, not a missing object.
    assert call(scheduler, "DELETE", "/api/v1/nodes/no-such-node", dry)[0] == 403
    assert call(scheduler, "GET", f"/api/v1/namespaces/{OTHER}/pods/no-such-pod/log")[0] == 403
    # An announced job's Service: in our namespace yes, elsewhere no.
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "rbac-probe"},
               "spec": {"selector": {"app": "x"}, "ports": [{"port": 80, "targetPort": "http"}]}}
    assert call(scheduler, "POST", f"/api/v1/namespaces/{NAMESPACE}/services", dry, service)[0] == 201
    assert call(scheduler, "POST", f"/api/v1/namespaces/{OTHER}/services", dry, service)[0] == 403
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "rbac-probe"},
              "stringData": {"x": "y"}}
    assert call(scheduler, "POST", f"/api/v1/namespaces/{NAMESPACE}/secrets", dry, secret)[0] == 403
    assert call(scheduler, "GET", f"/api/v1/namespaces/{NAMESPACE}/secrets")[0] == 403
