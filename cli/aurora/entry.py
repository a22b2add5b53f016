"""The `aurora` console script (the same commands as `peloton aurora`)."""

from __future__ import annotations

import sys

import click

from cli.aurora.exit_codes import EXIT_INTERRUPTED


def main() -> None:
    """Run `aurora ...` with Aurora's exit codes (130 when interrupted)."""
    from cli.aurora.group import aurora

    try:
        code = aurora.main(prog_name="aurora", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except (click.Abort, KeyboardInterrupt):
        sys.exit(EXIT_INTERRUPTED)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
