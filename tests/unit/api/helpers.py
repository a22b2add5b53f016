"""Fixture loading shared by the API converter tests."""

from __future__ import annotations

from pathlib import Path

from peloton.api import yaml_load
from peloton.api.gen.peloton.api.v0.job import job_pb2
from peloton.api.gen.peloton.api.v1alpha.job.stateless import stateless_pb2

FIXTURES = Path(__file__).parent / "fixtures"
JOB_ID = "6c5b6d6e-1f0a-4c47-9a43-2b0f3c9f0a11"


def fixture_text(name: str) -> str:
    """The text of one of our YAML fixtures."""
    return (FIXTURES / name).read_text()


def v0_config(name: str) -> job_pb2.JobConfig:
    """A v0 JobConfig fixture."""
    return yaml_load.load_job_config(fixture_text(name)).message


def v1_spec(name: str = "stateless_spec.yaml") -> stateless_pb2.JobSpec:
    """A v1alpha JobSpec fixture."""
    return yaml_load.load_stateless_job_spec(fixture_text(name)).message
