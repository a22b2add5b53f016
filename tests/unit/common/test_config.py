"""Config loading: YAML deep merge, environment overrides, typed conversion, errors naming the key."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from peloton.common.config import deep_merge, env_overrides, from_mapping, load_config
from peloton.common.leader import ElectionConfig
from peloton.common.logging import LoggingConfig
from peloton.common.metrics import MetricsConfig
from peloton.core.errors import InvalidArgument, NotFound


class Mode(enum.Enum):
    FIRST_FIT = "first_fit"
    LOAD_AWARE = "load_aware"


@dataclass(frozen=True, slots=True)
class GrpcConfig:
    port: int = 5392
    max_message_mb: float = 256.0

    def __post_init__(self) -> None:
        if not 0 < self.port < 65536:
            raise InvalidArgument("port out of range", field="port")


@dataclass(frozen=True, slots=True)
class DaemonConfig:
    election: ElectionConfig = field(default_factory=ElectionConfig)
    grpc: GrpcConfig = field(default_factory=GrpcConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    mode: Mode = Mode.FIRST_FIT
    data_dir: Path | None = None
    debug: bool = False
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class NeedsName:
    name: str


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_defaults_without_files_or_environment() -> None:
    config = load_config(DaemonConfig, env={})
    assert config == DaemonConfig()
    assert config.election.root == "/peloton" and config.grpc.port == 5392


def test_later_files_override_earlier_ones_key_by_key(tmp_path: Path) -> None:
    base = write(tmp_path, "base.yaml", """
election: {zk_servers: [zk1:2181, zk2:2181], root: /peloton}
grpc: {port: 5392, max_message_mb: 16}
labels: {team: compute, tier: gold}
""")
    prod = write(tmp_path, "production.yaml", """
election: {root: /peloton/prod}
grpc: {port: 6392}
labels: {tier: silver}
mode: load_aware
""")
    config = load_config(DaemonConfig, [base, prod], env={})
    assert config.election.zk_servers == ("zk1:2181", "zk2:2181")  # kept from base
    assert config.election.root == "/peloton/prod"
    assert config.grpc == GrpcConfig(port=6392, max_message_mb=16.0)
    assert config.labels == {"team": "compute", "tier": "silver"}
    assert config.mode is Mode.LOAD_AWARE


def test_lists_are_replaced_not_merged() -> None:
    merged = deep_merge({"a": [1, 2], "b": {"c": 1}}, {"a": [3], "b": {"d": 2}})
    assert merged == {"a": [3], "b": {"c": 1, "d": 2}}


def test_environment_overrides_files_with_prefixed_names_and_aliases(tmp_path: Path) -> None:
    base = write(tmp_path, "base.yaml", "grpc: {port: 5392}\nelection: {zk_servers: [zk1:2181]}\n")
    env = {
        "ELECTION_ZK_SERVERS": "a:2181, b:2181",
        "PELOTON_GRPC_PORT": "7000",
        "PELOTON_DEBUG": "yes",
        "PELOTON_METRICS_PORT": "",
        "PELOTON_DATA_DIR": "/var/lib/peloton",
        "PELOTON_MODE": "LOAD_AWARE",
        "PELOTON_SECRET_FILE": "/ignored/not/a/key",
    }
    config = load_config(DaemonConfig, [base], env=env)
    assert config.election.zk_servers == ("a:2181", "b:2181")
    assert config.grpc.port == 7000
    assert config.debug is True
    assert config.metrics.port is None
    assert config.data_dir == Path("/var/lib/peloton")
    assert config.mode is Mode.LOAD_AWARE


def test_prefixed_name_wins_over_alias() -> None:
    env = {"ELECTION_ZK_SERVERS": "alias:1", "PELOTON_ELECTION_ZK_SERVERS": "prefixed:1"}
    assert env_overrides(DaemonConfig, env) == {"election": {"zk_servers": "prefixed:1"}}


def test_unknown_alias_target_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="unknown config key"):
        env_overrides(DaemonConfig, {}, aliases={"GRPC": "grpc.nope"})


@pytest.mark.parametrize(("data", "field_name", "words"), [
    ({"grpc": {"port": "many"}}, "grpc.port", "expected an integer"),
    ({"grpc": {"port": 70000}}, "grpc.port", "out of range"),
    ({"grpc": {"prot": 1}}, "grpc.prot", "unknown config key"),
    ({"election": {"root": "peloton"}}, "election.root", "absolute"),
    ({"election": {"zk_servers": [1.5, {"a": 1}]}}, "election.zk_servers[1]", "expected a string"),
    ({"logging": {"level": "LOUD"}}, "logging.level", "level must be one of"),
    ({"debug": "maybe"}, "debug", "true or false"),
    ({"mode": "best"}, "mode", "FIRST_FIT"),
    ({"grpc": 5}, "grpc", "expected a mapping"),
])
def test_errors_name_the_key(data: dict[str, object], field_name: str, words: str) -> None:
    with pytest.raises(InvalidArgument) as info:
        from_mapping(DaemonConfig, data)
    assert info.value.field == field_name
    assert words in str(info.value)


def test_environment_errors_name_the_variable_and_the_key() -> None:
    with pytest.raises(InvalidArgument) as info:
        load_config(DaemonConfig, env={"PELOTON_GRPC_PORT": "five"})
    assert info.value.field == "grpc.port"
    assert "PELOTON_GRPC_PORT" in str(info.value)


def test_required_keys_and_bad_files(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument) as info:
        load_config(NeedsName, env={})
    assert info.value.field == "name"
    with pytest.raises(NotFound):
        load_config(DaemonConfig, [tmp_path / "missing.yaml"], env={})
    with pytest.raises(InvalidArgument, match="not valid YAML"):
        load_config(DaemonConfig, [write(tmp_path, "bad.yaml", "grpc: [unclosed\n")], env={})
    with pytest.raises(InvalidArgument, match="mapping at the top"):
        load_config(DaemonConfig, [write(tmp_path, "list.yaml", "- 1\n")], env={})
    assert load_config(DaemonConfig, [write(tmp_path, "empty.yaml", "")], env={}) == DaemonConfig()
