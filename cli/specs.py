"""Load the YAML files commands take (job configs, stateless specs, pool configs).

The parsing is `peloton.api.yaml_load`'s, which accepts Peloton's example
files as they are (lower-cased keys, enums by number or name, unknown keys
as warnings).  This module reads the file, prints those warnings on stderr
and puts the file name into any error, so the user knows which input to
fix: a bad file is InvalidArgument (exit code 4) naming file and field.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

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


def _load(path: str, loader: Callable[[str], yaml_load.Loaded[M]]) -> M:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise InvalidArgument(f"cannot read {path}: {exc.strerror}", field=path) from None
    try:
        loaded = loader(text)
    except InvalidArgument as exc:
        raise InvalidArgument(f"{path}: {exc.message}", field=exc.field) from None
    out = context.out()
    for warning in loaded.warnings:
        out.warn(f"{path}: {warning}")
    return loaded.message
