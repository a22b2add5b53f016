"""Load the YAML files commands take (job configs, stateless specs, pool configs).

The parsing is `peloton.api.yaml_load`'s, which accepts Peloton's example
files as they are (lower-cased keys, enums by number or name).  This module
reads the file and puts the file name into any error, so the user knows
which input to fix: a bad file is InvalidArgument (exit code 4) naming file,
line and field.  An unknown field is an error naming `file:line` and the
closest known field (a typo such as `cpulimt` would otherwise run the job
with no cpu), unless the command was given `--lenient`, which only warns;
the few keys Peloton's own example files carry that its API never had
(`yaml_load.LEGACY_KEYS`) are always only warnings.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import click
from google.protobuf.message import Message

from cli import context
from peloton.api import yaml_load
from peloton.api.gen.peloton.api.v0.job import job_pb2
from peloton.api.gen.peloton.api.v0.respool import respool_pb2
from peloton.api.gen.peloton.api.v1alpha.job.stateless import stateless_pb2
from peloton.core.errors import InvalidArgument

M = TypeVar("M", bound=Message)


def load_job_config(path: str) -> job_pb2.JobConfig:
    """A v0 JobConfig from a Peloton job YAML file (batch or service)."""
    return _load(path, yaml_load.load_job_config)


def load_job_spec(path: str) -> stateless_pb2.JobSpec:
    """A v1alpha stateless JobSpec from YAML."""
    return _load(path, yaml_load.load_stateless_job_spec)


def load_respool_config(path: str) -> respool_pb2.ResourcePoolConfig:
    """A v0 ResourcePoolConfig from a Peloton resource-pool YAML file."""
    return _load(path, yaml_load.load_respool_config)


def _load(path: str, loader: Callable[[str, str], yaml_load.Loaded[M]]) -> M:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise InvalidArgument(f"cannot read {path}: {exc.strerror}", field=path) from None
    try:
        loaded = loader(text, path)
    except InvalidArgument as exc:
        message = exc.message if exc.message.startswith(path) else f"{path}: {exc.message}"
        raise InvalidArgument(message, field=exc.field) from None
    ctx = click.get_current_context(silent=True)
    lenient = bool(ctx and ctx.meta.get("peloton.lenient"))
    refused = [u for u in loaded.unknown if not u.legacy]
    if refused and not lenient:
        first = refused[0]
        more = f" (and {len(refused) - 1} more)" if len(refused) > 1 else ""
        raise InvalidArgument(f"{first.describe(path)}{more}; fix it, or pass --lenient to "
                              "ignore unknown fields", field=first.path)
    out = context.out()
    for warning in loaded.warnings:
        out.warn(f"{path}: {warning}")
    return loaded.message
