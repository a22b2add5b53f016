"""The Kubernetes manifests of docs/deploy/kubernetes/ as tests use them.

`load_manifests` reads the objects of a YAML file (or of every YAML file of a directory),
`apply` sends them to an API server (for real, or as a server-side dry run that the server
validates and admits without storing anything), and `scheduler_kubeconfig` signs in as the
scheduler's ServiceAccount with exactly the permissions of rbac.yaml.

Requests go through the `kubernetes` client's transport as plain JSON (`param_serialize` +
`call_api`, as peloton/hostmgr/backends/k8s_api.py does), not its model classes: any kind is sent
as written, and the collection it goes to is found through the API server's discovery, so a
manifest of a kind the client has no model for needs no code here.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import yaml

from tests.harness.procs import REPO

Json = dict[str, Any]

#: The manifests the deployment guide (docs/deploy/kubernetes.md) tells users to apply.
MANIFESTS = REPO / "docs" / "deploy" / "kubernetes"
NAMESPACE = "pelotonpy"
SERVICE_ACCOUNT = "pelotonpy"
#: Who our server-side applies are recorded as (metadata.managedFields).
FIELD_MANAGER = "pelotonpy-tests"
TIMEOUT = 30.0


class Rejected(AssertionError):
    """The API server refused an object; `status` is the HTTP status, `reason` Kubernetes'
    reason (AlreadyExists, Invalid, Forbidden, ...)."""

    def __init__(self, what: str, status: int, reason: str, message: str) -> None:
        super().__init__(f"{what}: {status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message


def load_manifests(path: str | Path) -> list[Json]:
    """The objects of a YAML file, or of every `*.yaml` file of a directory (in name order),
    in the order written; empty documents (a file's leading comments) are skipped."""
    path = Path(path)
    files = sorted(path.glob("*.yaml")) if path.is_dir() else [path]
    objects: list[Json] = []
    for file in files:
        for doc in yaml.safe_load_all(file.read_text()):
            if doc is None:
                continue
            if not isinstance(doc, dict) or not doc.get("apiVersion") or not doc.get("kind"):
                raise ValueError(f"{file}: a document that is not a Kubernetes object: {doc!r:.200}")
            objects.append(doc)
    return objects


def call(api_client: Any, method: str, path: str, query: Sequence[tuple[str, str]] = (),
         body: Json | None = None, content_type: str = "application/json") -> tuple[int, Json]:
    """One request to the API server; (HTTP status, JSON answer).  Never raises for a status:
    the caller decides what an error means."""
    headers = {"Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = content_type
    method, url, headers, body, _ = api_client.param_serialize(
        method, path, query_params=list(query), header_params=headers, body=body,
        auth_settings=["BearerToken"])
    # The client serialises a dict body itself, as JSON (which is also YAML, for apply patches).
    response = api_client.call_api(method, url, header_params=headers, body=body,
                                   _request_timeout=TIMEOUT)
    data = response.read()
    answer: Json = json.loads(data) if data else {}
    return int(response.status), answer


#: (API server, apiVersion) -> kind -> (resource name, namespaced), from discovery.
_discovered: dict[tuple[str, str], dict[str, tuple[str, bool]]] = {}


def _resource_of(api_client: Any, api_version: str, kind: str) -> tuple[str, bool]:
    """The resource (plural name) serving `kind` in `api_version`, and whether it is namespaced."""
    key = (str(api_client.configuration.host), api_version)
    if key not in _discovered:
        path = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        status, answer = call(api_client, "GET", path)
        if status != 200:
            raise Rejected(f"discovery of {api_version}", status, answer.get("reason", ""),
                           answer.get("message", str(answer)[:300]))
        # Subresources (pods/log) share their parent's kind; only the top-level names are wanted.
        _discovered[key] = {r["kind"]: (r["name"], bool(r["namespaced"]))
                            for r in answer.get("resources", ()) if "/" not in r["name"]}
    kinds = _discovered[key]
    if kind not in kinds:
        raise ValueError(f"the API server serves no kind {kind!r} in {api_version}")
    return kinds[kind]


def collection_path(api_client: Any, obj: Json) -> str:
    """The URL path of the collection `obj` is created in, e.g.
    /apis/apps/v1/namespaces/pelotonpy/deployments (a namespaced object without a namespace
    goes to `default`, as kubectl sends it)."""
    api_version, kind = obj["apiVersion"], obj["kind"]
    resource, namespaced = _resource_of(api_client, api_version, kind)
    prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    if not namespaced:
        return f"{prefix}/{resource}"
    namespace = (obj.get("metadata") or {}).get("namespace") or "default"
    return f"{prefix}/namespaces/{namespace}/{resource}"


def describe(obj: Json) -> str:
    """`Kind namespace/name` of an object, for messages."""
    meta = obj.get("metadata") or {}
    where = f"{meta['namespace']}/" if meta.get("namespace") else ""
    return f"{obj.get('kind')} {where}{meta.get('name', '?')}"


def apply(api_client: Any, objects: Iterable[Json], dry_run: bool) -> list[Json]:
    """Create each object, in order, and return the server's answers (the objects as stored,
    defaults filled in).  Any refusal raises Rejected naming the object.

    Unknown or duplicated fields are refused (fieldValidation=Strict, what kubectl asks for).
    For real (`dry_run` false), an object that already exists (409 AlreadyExists) is left as it
    is and its stored version returned.  As a dry run (`dryRun=All`: validated and admitted,
    nothing stored), an object that exists is checked as an update instead: a server-side
    apply of the manifest over it, also as a dry run.
    """
    answers = []
    for obj in objects:
        path = collection_path(api_client, obj)
        name = obj["metadata"]["name"]
        # Strict: a misspelt or duplicated field is an error, as with kubectl (the API's own
        # default only warns and drops it).
        query = [("fieldValidation", "Strict"), *([("dryRun", "All")] if dry_run else [])]
        status, answer = call(api_client, "POST", path, [*query, ("fieldManager", FIELD_MANAGER)],
                              body=obj)
        if status == 409 and answer.get("reason") == "AlreadyExists":
            if dry_run:
                status, answer = call(api_client, "PATCH", f"{path}/{name}",
                                      [*query, ("fieldManager", FIELD_MANAGER), ("force", "true")],
                                      body=obj, content_type="application/apply-patch+yaml")
            else:
                status, answer = call(api_client, "GET", f"{path}/{name}")
        if not 200 <= status < 300:
            raise Rejected(describe(obj) + (" (dry run)" if dry_run else ""), status,
                           str(answer.get("reason", "")), str(answer.get("message", answer)))
        answers.append(answer)
    return answers


def scheduler_kubeconfig(kube: Any, directory: Path) -> Path:
    """A kubeconfig signed in as the scheduler's ServiceAccount (pelotonpy/pelotonpy) and
    allowed exactly what docs/deploy/kubernetes/rbac.yaml grants, which this applies for real
    together with namespace.yaml (both may already be there).  `kube` is the test control
    plane (tests/harness/kube.py)."""
    objects = load_manifests(MANIFESTS / "namespace.yaml") + load_manifests(MANIFESTS / "rbac.yaml")
    apply(kube.api(), objects, dry_run=False)
    token = kube.token_for_service_account(NAMESPACE, SERVICE_ACCOUNT)
    directory.mkdir(parents=True, exist_ok=True)
    return Path(kube.kubeconfig_for_token(token, directory / "pelotonpy-scheduler.kubeconfig"))
