"""Every example YAML of uber/peloton loads as it is, and converts as Peloton would take it.

Reads the files straight from the mirror of the original repository (nothing
is copied into ours); skipped when the mirror is not on this machine.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from peloton.api import yaml_load
from peloton.api.convert import v0_job, v0_respool, v1_job
from peloton.core.errors import InvalidArgument

MIRROR = Path("/work/.mirror/uber+peloton/repo")

#: Files Peloton itself rejects, and the field we name.  test_http_health.yaml is a batch job
#: with health checks (validate.go: "Batch job task should not set health check");
#: performance/testjob_base.yaml is a template whose instance count the benchmark fills in.
REJECTED = {
    "example/test_http_health.yaml": "instanceConfig[0].healthCheck",
    "example/performance/testjob_base.yaml": "instanceCount",
}
#: Keys the originals carry that Peloton's API never had (Go ignored them silently).
KNOWN_UNKNOWN = {"minimuminstancecount", "minimuminstancepercent"}


def _examples() -> list[str]:
    if not MIRROR.exists() or shutil.which("git") is None:
        return []
    names = subprocess.run(["git", "-C", str(MIRROR), "ls-tree", "-r", "--name-only", "HEAD",
                            "example"], capture_output=True, text=True, check=True).stdout.split()
    return [n for n in names if n.endswith(".yaml") and not n.startswith("example/auth/")]


EXAMPLES = _examples()


def _text(name: str) -> str:
    return subprocess.run(["git", "-C", str(MIRROR), "show", f"HEAD:{name}"],
                          capture_output=True, text=True, check=True).stdout


@pytest.mark.skipif(not EXAMPLES, reason="uber/peloton mirror not available")
def test_the_mirror_has_the_examples_we_expect() -> None:
    assert len(EXAMPLES) >= 20
    assert "example/stateless/testspec.yaml" in EXAMPLES


@pytest.mark.skipif(not EXAMPLES, reason="uber/peloton mirror not available")
@pytest.mark.parametrize("name", EXAMPLES)
def test_original_example_loads_and_converts(name: str) -> None:
    text = _text(name)
    if name.endswith("_respool.yaml") or name.endswith("_pool.yaml"):
        loaded_pool = yaml_load.load_respool_config(text)
        assert loaded_pool.warnings == ()
        assert v0_respool.respool_config_from_v0(loaded_pool.message).resources
        return
    if name.startswith("example/stateless/"):
        loaded_spec = yaml_load.load_stateless_job_spec(text)
        assert loaded_spec.warnings == ()
        assert v1_job.job_spec_from_v1(loaded_spec.message).instance_count > 0
        return
    loaded = yaml_load.load_job_config(text)
    for warning in loaded.warnings:
        assert warning.split(":")[0].rsplit(".", 1)[-1] in KNOWN_UNKNOWN, warning
    if name in REJECTED:
        with pytest.raises(InvalidArgument) as err:
            v0_job.job_spec_from_v0(loaded.message)
        assert err.value.field == REJECTED[name]
    else:
        spec = v0_job.job_spec_from_v0(loaded.message)
        assert spec.default_task.command.value or spec.instance_tasks
