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
    daemon = bool(words) and words[0] in DAEMON_COMMANDS
    if daemon:
        from peloton.common.geventsetup import setup

        setup()
    from cli.main import cli

    if not daemon:
        cli()
        return
    # A daemon that has stopped ends at once: the interpreter's own shutdown waits for
    # whatever is still running (peloton/common/shutdown.py).
    from peloton.common.shutdown import exit_now

    try:
        cli()
    except SystemExit as exc:
        code = exc.code
        if isinstance(code, str):
            print(code, file=sys.stderr)
        exit_now(code if isinstance(code, int) else (1 if code else 0))
    exit_now(0)


if __name__ == "__main__":
    main()
