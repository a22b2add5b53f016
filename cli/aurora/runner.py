"""Runs one `aurora` verb: gives it a context, turns its outcome into Aurora's exit code."""

from __future__ import annotations

import functools
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any

import click

from cli.aurora.context import AuroraContext, err
from cli.aurora.exit_codes import EXIT_INTERRUPTED, EXIT_UNKNOWN_ERROR, CommandError


def verb(func: Callable[..., int | None]) -> Callable[..., None]:
    """Wrap a verb `func(ctx, **params) -> exit code`: CommandError prints its message and
    exits with its code; any other failure is Aurora's "Fatal error" (exit 20)."""
    @functools.wraps(func)
    def run(*args: Any, **kw: Any) -> None:
        try:
            code = func(AuroraContext(), *args, **kw)
        except CommandError as exc:
            if exc.message:
                err(exc.message)
            raise click.exceptions.Exit(exc.code) from None
        except KeyboardInterrupt:
            raise click.exceptions.Exit(EXIT_INTERRUPTED) from None
        except BrokenPipeError:  # the reader went away (`aurora job status ... | head`)
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise click.exceptions.Exit(0) from None
        except (click.exceptions.Exit, click.ClickException):
            raise
        except Exception as exc:  # Aurora's client reports anything unexpected this way
            err(f"Fatal error running command: {exc}")
            err(traceback.format_exc())
            raise click.exceptions.Exit(EXIT_UNKNOWN_ERROR) from None
        raise click.exceptions.Exit(code or 0)

    return run
