"""The `aurora` command's exit codes: Aurora's client's, so scripts written for it keep working.

| code | meaning |
|------|---------|
| 0    | success |
| 2    | usage error (bad flag or argument, as argparse/click report it) |
| 3    | invalid configuration (the config file, clusters.json, an unknown cluster) |
| 4    | the command failed (the scheduler refused, a wait ended badly) |
| 5    | invalid command |
| 6    | invalid parameter (no such job, instance or update) |
| 7    | network error (the scheduler cannot be reached) |
| 9    | timeout |
| 10   | API error (the scheduler answered with an error) |
| 20   | unknown error |
| 30   | authentication failed |
| 130  | interrupted |
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_INVALID_CONFIGURATION = 3
EXIT_COMMAND_FAILURE = 4
EXIT_INVALID_COMMAND = 5
EXIT_INVALID_PARAMETER = 6
EXIT_NETWORK_ERROR = 7
EXIT_TIMEOUT = 9
EXIT_API_ERROR = 10
EXIT_UNKNOWN_ERROR = 20
EXIT_AUTH_ERROR = 30
EXIT_INTERRUPTED = 130


class CommandError(Exception):
    """Stop the command: print `message` to stderr and exit with `code`."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
