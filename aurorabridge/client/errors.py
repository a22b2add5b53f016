"""Errors of `.aurora` configs: each names the file and line, and the field when known."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a config: `path:line: field: message`."""

    path: str
    line: int | None
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line is not None else self.path
        return f"{where}: {self.field}: {self.message}" if self.field else f"{where}: {self.message}"


class ConfigError(Exception):
    """A config that cannot be loaded or turned into a job; `problems` lists every finding."""

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("\n".join(str(p) for p in problems))
        self.problems = problems

    @classmethod
    def one(cls, path: str, line: int | None, field: str, message: str) -> ConfigError:
        """An error with a single problem."""
        return cls([Problem(path, line, field, message)])
