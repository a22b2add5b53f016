"""The `peloton` console script.

Daemon commands (`up`, `agent`, `aurorabridge`, ...) run under gevent, and
gevent must patch the standard library before anything imports threading
or grpc; so this module looks at the command first and imports the click
tree only afterwards.
"""

from __future__ import annotations

import sys

#: Commands that run long-lived, greenlet-based servers.
DAEMON_COMMANDS = frozenset({"up", "agent", "aurorabridge", "jobmgr", "resmgr", "hostmgr",
                             "placement", "archiver", "ui"})


def main() -> None:
    """Entry point of the `peloton` command."""
    words = [w for w in sys.argv[1:] if not w.startswith("-")]
    if words and words[0] in DAEMON_COMMANDS:
        from peloton.common.geventsetup import setup

        setup()
    from cli.main import cli

    cli()


if __name__ == "__main__":
    main()
