"""Aurora job keys as Peloton job names and labels, with Aurora's identifier rules.

A Peloton job created by the bridge is named `role/environment/name`
(Peloton's atop.NewJobName); ptoa.job_key splits it back.  Each part must be
a good Aurora identifier: `^[\\w\\-\\.]+$`, at most 255 characters
(UserProvidedStrings.isGoodIdentifier), which also guarantees no `/` inside.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from peloton.core.errors import InvalidArgument

GOOD_IDENTIFIER = re.compile(r"^[\w\-\.]+$")
MAX_IDENTIFIER_LENGTH = 255


@dataclass(frozen=True, slots=True)
class JobKey:
    """A validated Aurora job key."""

    role: str
    environment: str
    name: str

    @property
    def job_name(self) -> str:
        """The Peloton job name."""
        return f"{self.role}/{self.environment}/{self.name}"

    def __str__(self) -> str:
        return self.job_name


def check_identifier(value: Any, what: str) -> str:
    """`value` if it is a good Aurora identifier, else InvalidArgument naming `what`."""
    if not isinstance(value, str) or not value:
        raise InvalidArgument(f"{what} must be a non-empty string", field=what)
    if len(value) > MAX_IDENTIFIER_LENGTH:
        raise InvalidArgument(f"{what} is longer than {MAX_IDENTIFIER_LENGTH} characters", field=what)
    if not GOOD_IDENTIFIER.match(value):
        raise InvalidArgument(f"{what} {value!r} may only contain letters, digits, '_', '-' and '.'",
                              field=what)
    return value


def job_key(key: Any, what: str = "job key") -> JobKey:
    """Validate an Aurora JobKey struct (role, environment, name all good identifiers)."""
    if key is None:
        raise InvalidArgument(f"{what} is required", field=what)
    return JobKey(check_identifier(key.role, f"{what}.role"),
                  check_identifier(key.environment, f"{what}.environment"),
                  check_identifier(key.name, f"{what}.name"))


def check_environment(key: JobKey, pattern: str) -> None:
    """Aurora's allowed-environment rule, applied where jobs are created or changed; an empty
    `pattern` accepts any environment (Peloton's bridge's rule)."""
    if pattern and not re.match(pattern, key.environment):
        raise InvalidArgument(
            f"job environment {key.environment!r} does not match the allowed pattern {pattern}",
            field="environment")
