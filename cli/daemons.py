"""`peloton jobmgr|resmgr|hostmgr|placement`: run one daemon as its own process.

Each takes one or more `--config FILE` (YAML, later files win; environment
overrides after them, e.g. ELECTION_ZK_SERVERS) and runs until SIGINT or
SIGTERM.  With `election.zk_servers` set, the job, resource and host
managers elect a leader through ZooKeeper and publish it at
`<root>/<role>/leader`, where `peloton -z` and agents started with
`--zkservers` find it; see peloton/cluster/daemons/config.py for the format
and docs/config/ for examples.
"""

from __future__ import annotations

import click

_HELP = {
    "jobmgr": "Run the job manager (jobs, tasks, updates; gRPC 5392).",
    "resmgr": "Run the resource manager (pools, admission, preemption; gRPC 5394).",
    "hostmgr": "Run the host manager (hosts, agents, status stream; gRPC 5391).",
    "placement": "Run a placement engine (no election: run as many as you like; 5393).",
}


def _daemon(role: str) -> click.Command:
    @click.command(role, help=f"""{_HELP[role]}

    \b
    Example:
      peloton {role} --config docs/config/{role}.yaml
      ELECTION_ZK_SERVERS=127.0.0.1:2181 peloton {role} --config docs/config/{role}.yaml
    """)
    @click.option("-c", "--config", "files", multiple=True, required=True,
                  type=click.Path(exists=True, dir_okay=False),
                  help="YAML config file (repeatable; later files override earlier ones).")
    @click.option("--backend", default="", hidden=role != "hostmgr",
                  help='Host backend, overriding the config\'s `backend:`: "local", '
                  '"sim:N[:TASK_S[:CPUS[:START_S]]]", "mesos:URL", "k8s:KUBECONFIG" or '
                  '"k8s:in-cluster".')
    def command(files: tuple[str, ...], backend: str) -> None:
        from peloton.common import geventsetup

        geventsetup.setup()  # before anything imports grpc users
        from peloton.cluster.daemons.process import run
        from peloton.core.errors import PelotonError

        try:
            run(role, files, backend=backend)
        except PelotonError as exc:
            raise click.ClickException(str(exc)) from None

    return command


jobmgr = _daemon("jobmgr")
resmgr = _daemon("resmgr")
hostmgr = _daemon("hostmgr")
placement = _daemon("placement")
