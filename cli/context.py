"""Global flags of `peloton`, the client they configure, and error reporting.

The flags, short names, defaults and environment overrides are the
original CLI's (`cmd/cli/main.go`), so existing scripts keep working:
`-j/--json`, `-m/--jobmgr` ($JOBMGR_URL), `-v/--resmgr` ($RESMGR_URL),
`-u/--hostmgr` ($HOSTMGR_URL), `-e/--clusterName` ($CLUSTER_NAME, looked
up in clusters.json), `-z/--zkservers` ($ZK_SERVERS, whitespace
separated), `--zkroot` ($ZK_ROOT), `--basicAuthConfig`
($BASIC_AUTH_CONFIG), `-t/--timeout` ($TIMEOUT, a Go duration like `20s`).
The client is built on first use, so commands that need no cluster
(`peloton up`, `--help`) never connect anywhere.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import click
import yaml

from cli import output, params, wait
from cli.exit_codes import ExitCode, exit_code_for
from peloton.api.client import DEFAULT_TIMEOUT, PelotonClient
from peloton.common.tls import TlsFiles
from peloton.core.errors import PelotonError

F = TypeVar("F", bound=Callable[..., Any])

CLUSTER_FILES = (Path.home() / ".peloton" / "clusters.json", Path("/etc/peloton/clusters.json"))


@dataclass
class Settings:
    """Values of the global flags, and the client built from them."""

    json: bool = False
    jobmgr: str = "localhost:5392"
    resmgr: str = "localhost:5394"
    hostmgr: str = "localhost:5391"
    cluster_name: str = ""
    zk_servers: tuple[str, ...] = ()
    zk_root: str = "/peloton"
    basic_auth_config: str = ""
    tls_cert: str = ""
    tls_key: str = ""
    tls_ca: str = ""
    timeout: float = DEFAULT_TIMEOUT
    poll_interval: float = 1.0
    _client: PelotonClient | None = field(default=None, repr=False)

    def client(self) -> PelotonClient:
        """The client for this invocation (discovery runs on the first call)."""
        if self._client is None:
            servers = self.zk_servers
            if self.cluster_name:
                servers = cluster_zk_servers(self.cluster_name, servers)
            try:
                tls = TlsFiles.from_options(self.tls_cert, self.tls_key, self.tls_ca)
                self._client = PelotonClient(
                    self.jobmgr, self.resmgr, self.hostmgr, zk_servers=servers, zk_root=self.zk_root,
                    timeout=self.timeout, headers=basic_auth_headers(self.basic_auth_config),
                    tls=tls)
            except ValueError as exc:  # an address that is not host:port
                raise click.UsageError(str(exc)) from None
            except PelotonError as exc:  # TLS files that are not there
                raise click.UsageError(exc.message) from None
            if not self.basic_auth_config:
                # A token from `peloton login` for this cluster, if there is one.
                from cli.auth import stored_token

                token = stored_token(self._client.endpoints.jobmgr)
                if token:
                    self._client = self._client.with_headers({"authorization": f"Bearer {token}"})
            click.get_current_context().call_on_close(self._client.close)
        return self._client


def cluster_zk_servers(name: str, given: tuple[str, ...],
                       files: tuple[Path, ...] = CLUSTER_FILES) -> tuple[str, ...]:
    """ZooKeeper servers of cluster `name` from clusters.json; `given` ones must be among them."""
    for path in files:
        if not path.is_file():
            continue
        try:
            clusters = json.loads(path.read_text()).get("clusters", [])
        except (OSError, ValueError, AttributeError) as exc:
            raise click.UsageError(f"cannot read {path}: {exc}") from None
        for entry in clusters:
            if entry.get("clusterName") == name:
                servers = tuple(s.strip() for s in str(entry.get("zkURL", "")).split(",") if s.strip())
                stray = [s for s in given if s not in servers]
                if stray:
                    raise click.UsageError(
                        f"zk servers of cluster {name} ({','.join(servers)}) do not include "
                        f"{', '.join(stray)}; correct or remove --clusterName or --zkservers")
                return servers
    where = " or ".join(str(p) for p in files)
    raise click.UsageError(f"cluster {name!r} not found in {where}")


def basic_auth_headers(path: str) -> dict[str, str]:
    """`username`/`password` headers from a basic-auth YAML file (none when `path` is empty)."""
    if not path:
        return {}
    try:
        conf = yaml.safe_load(Path(path).read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise click.UsageError(f"cannot load basic auth config {path}: {exc}") from None
    return {"username": str(conf.get("username", "")), "password": str(conf.get("password", ""))}


def settings() -> Settings:
    """The Settings of the running command."""
    return click.get_current_context().ensure_object(Settings)


def client() -> PelotonClient:
    """The client of the running command."""
    return settings().client()


def out() -> output.Output:
    """The renderer of the running command (tables, or JSON with -j)."""
    return output.Output(json_mode=settings().json)


def poller(wait_timeout: float = 0.0) -> wait.Poller:
    """How `--wait` polls in this invocation (`wait_timeout` 0 = no limit)."""
    return wait.Poller(poll=settings().poll_interval, timeout=wait_timeout or None)


def _store(attr: str, convert: Callable[[Any], Any] = lambda v: v) -> Callable[..., None]:
    def callback(ctx: click.Context, _param: click.Parameter, value: Any) -> None:
        setattr(ctx.ensure_object(Settings), attr, convert(value))

    return callback


_GLOBAL_OPTIONS = [
    click.option("-j", "--json", "json_", is_flag=True, expose_value=False, callback=_store("json"),
                 help="Print full JSON responses."),
    click.option("-m", "--jobmgr", default="localhost:5392", show_default=True, envvar="JOBMGR_URL",
                 expose_value=False, callback=_store("jobmgr"),
                 help="Job manager gRPC address (set $JOBMGR_URL to override)."),
    click.option("-v", "--resmgr", default="localhost:5394", show_default=True, envvar="RESMGR_URL",
                 expose_value=False, callback=_store("resmgr"),
                 help="Resource manager gRPC address (set $RESMGR_URL to override)."),
    click.option("-u", "--hostmgr", default="localhost:5391", show_default=True, envvar="HOSTMGR_URL",
                 expose_value=False, callback=_store("hostmgr"),
                 help="Host manager gRPC address (set $HOSTMGR_URL to override)."),
    click.option("-e", "--clusterName", "cluster_name", default="", envvar="CLUSTER_NAME",
                 expose_value=False, callback=_store("cluster_name"),
                 help="Cluster to use, from clusters.json in ~/.peloton or /etc/peloton."),
    click.option("-z", "--zkservers", multiple=True, envvar="ZK_SERVERS", expose_value=False,
                 callback=_store("zk_servers", tuple),
                 help="ZooKeeper server for leader discovery; repeat for several "
                      "(set $ZK_SERVERS, space separated, to override)."),
    click.option("--zkroot", default="/peloton", show_default=True, envvar="ZK_ROOT",
                 expose_value=False, callback=_store("zk_root"),
                 help="ZooKeeper root path of Peloton's leader znodes (set $ZK_ROOT to override)."),
    click.option("--basicAuthConfig", "basic_auth_config", default="", envvar="BASIC_AUTH_CONFIG",
                 expose_value=False, callback=_store("basic_auth_config"),
                 help="YAML file with `username` and `password` for basic auth."),
    click.option("--tls-cert", default="", envvar="PELOTON_TLS_CERT", expose_value=False,
                 callback=_store("tls_cert"), help="Client certificate for TLS clusters "
                 "($PELOTON_TLS_CERT)."),
    click.option("--tls-key", default="", envvar="PELOTON_TLS_KEY", expose_value=False,
                 callback=_store("tls_key"), help="Key of --tls-cert ($PELOTON_TLS_KEY)."),
    click.option("--tls-ca", default="", envvar="PELOTON_TLS_CA", expose_value=False,
                 callback=_store("tls_ca"), help="CA of the cluster's certificates ($PELOTON_TLS_CA)."),
    click.option("-t", "--timeout", default="20s", show_default=True, envvar="TIMEOUT",
                 type=params.DURATION, expose_value=False, callback=_store("timeout"),
                 help="RPC timeout, e.g. 20s, 1m30s (set $TIMEOUT to override)."),
    click.option("--poll-interval", default=1.0, type=float, hidden=True, envvar="PELOTON_POLL_INTERVAL",
                 expose_value=False, callback=_store("poll_interval"),
                 help="Seconds between polls while waiting."),
]


def global_options(f: F) -> F:
    """Add the original CLI's global flags to the root group."""
    for opt in reversed(_GLOBAL_OPTIONS):
        f = opt(f)
    return f


class PelotonGroup(click.Group):
    """The root group: reports any PelotonError once, with its exit code (cli/exit_codes.py)."""

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; turn our errors into a message on stderr and an exit code."""
        try:
            return super().invoke(ctx)
        except PelotonError as exc:
            found = ctx.find_object(Settings)
            output.Output(json_mode=bool(found and found.json)).error(exc)
            ctx.exit(exit_code_for(exc))
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            ctx.exit(ExitCode.INTERRUPTED)
