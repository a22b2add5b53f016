"""The host backend registry: one name picks a backend for `peloton up` and `peloton hostmgr`."""

from __future__ import annotations

from pathlib import Path

import pytest

from peloton.cluster.daemons.config import HostmgrProcessConfig, load
from peloton.core.errors import InvalidArgument
from peloton.core.model.storage_records import FrameworkInfo
from peloton.hostmgr.backends.k8s import KubeBackend
from peloton.hostmgr.backends.k8s_config import KubeConfig
from peloton.hostmgr.backends.local import LocalBackend
from peloton.hostmgr.backends.mesos import MesosBackend, MesosConfig
from peloton.hostmgr.backends.registry import BackendEnv, BackendSpec, open_backend
from peloton.hostmgr.backends.sim import SimBackend


class Records:
    """A stand-in for the store's frameworks table."""

    def __init__(self) -> None:
        self.rows: dict[str, FrameworkInfo] = {}

    def get_framework_info(self, name: str) -> FrameworkInfo | None:
        return self.rows.get(name)

    def put_framework_info(self, info: FrameworkInfo) -> None:
        self.rows[info.name] = info


@pytest.mark.parametrize("text", ["", "kubernetes", "mesos", "mesos:", "local:x", "sim:a",
                                  "sim:1:2:3:4:5", "sim:-1", "k8s", "k8s:"])
def test_bad_names_are_refused_naming_the_field(text: str) -> None:
    with pytest.raises(InvalidArgument) as err:
        BackendSpec.parse(text)
    assert err.value.field == "backend"


def test_each_kind_builds_its_backend() -> None:
    assert isinstance(open_backend("local", BackendEnv()), LocalBackend)
    sim = open_backend("sim:7:0.5:2", BackendEnv())
    assert isinstance(sim, SimBackend) and len(sim._hosts) == 7 and sim.task_secs == 0.5
    mesos = open_backend("mesos:zk://127.0.0.1:2181/mesos",
                         BackendEnv(mesos=MesosConfig(tick_secs=0.5, role="batch")))
    assert isinstance(mesos, MesosBackend)
    assert mesos.config.master == "zk://127.0.0.1:2181/mesos"
    assert (mesos.config.tick_secs, mesos.config.role) == (0.5, "batch")


def test_mesos_keeps_its_framework_id_in_the_store() -> None:
    records = Records()
    backend = open_backend("mesos:127.0.0.1:5050", BackendEnv(frameworks=records))
    assert isinstance(backend, MesosBackend)
    assert backend.load_framework_id() == ""
    backend.save_framework_id("fw-1", "stream-1")
    again = open_backend("mesos:127.0.0.1:5050", BackendEnv(frameworks=records))
    assert isinstance(again, MesosBackend) and again.load_framework_id() == "fw-1"


def test_the_hostmgr_config_names_its_backend(tmp_path: object) -> None:
    assert load(HostmgrProcessConfig, env={}).backend == "local"
    cfg = load(HostmgrProcessConfig, env={"PELOTON_BACKEND": "mesos:http://m:5050",
                                          "PELOTON_MESOS_TICK_SECS": "0.1"})
    assert cfg.backend == "mesos:http://m:5050" and cfg.mesos.tick_secs == 0.1
    with pytest.raises(InvalidArgument, match="unknown host backend"):
        load(HostmgrProcessConfig, env={"PELOTON_BACKEND": "yarn"})


def test_without_the_extras_the_error_says_what_to_install(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from peloton.storage import open_store

    monkeypatch.setitem(__import__("sys").modules, "urllib3", None)  # as if not installed
    monkeypatch.setitem(__import__("sys").modules, "cassandra", None)
    with pytest.raises(InvalidArgument, match=r"pip install 'peloton-py\[mesos\]'"):
        open_backend("mesos:127.0.0.1:5050", BackendEnv())
    with pytest.raises(InvalidArgument, match=r"pip install 'peloton-py\[cassandra\]'"):
        open_store("cassandra://127.0.0.1:9042/peloton")


def test_the_k8s_backend_takes_a_kubeconfig_and_its_settings(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument, match="no kubeconfig file"):
        open_backend(f"k8s:{tmp_path / 'missing'}", BackendEnv())
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: k, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n")
    backend = open_backend(f"k8s:{kubeconfig}", BackendEnv(
        kubernetes=KubeConfig(namespace="team-a", default_image="repo/base:1")))
    assert isinstance(backend, KubeBackend)
    assert (backend.config.source, backend.config.namespace) == (str(kubeconfig), "team-a")
    assert backend.config.default_image == "repo/base:1"


def test_the_host_manager_config_has_a_strict_kubernetes_section(tmp_path: Path) -> None:
    good = tmp_path / "hostmgr.yaml"
    good.write_text("backend: k8s:in-cluster\nkubernetes:\n  namespace: batch\n"
                    "  pool_namespaces: {pool-1: team-a}\n  port_range: [30000, 30999]\n")
    config = load(HostmgrProcessConfig, [good])
    assert config.kubernetes.namespace == "batch"
    assert config.kubernetes.namespace_of("pool-1") == "team-a"
    assert config.kubernetes.port_range == (30000, 30999)
    bad = tmp_path / "bad.yaml"
    bad.write_text("kubernetes:\n  namespace: Not_A_Label\n")
    with pytest.raises(InvalidArgument, match=r"kubernetes\.namespace"):
        load(HostmgrProcessConfig, [bad])
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text("kubernetes:\n  namspace: batch\n")
    with pytest.raises(InvalidArgument, match=r"kubernetes\.namspace"):
        load(HostmgrProcessConfig, [unknown])
