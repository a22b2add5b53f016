"""Our proto/ and thrift/ must match the committed wire manifests exactly.

The manifests were extracted from the originals (see tests/wire/manifest.py);
a renumbered field, a renamed enum value, a dropped method or a changed
type shows up here as a named difference.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from tests.wire import check, manifest


def test_proto_matches_peloton_manifest() -> None:
    expected = json.loads(check.PROTO_MANIFEST.read_text())
    problems = check.diff(expected, check.ours_proto())
    assert problems == [], "\n".join(problems[:50])


def test_private_host_queries_match_peloton_manifest() -> None:
    """The part of Peloton's private InternalHostService we serve (ClusterCapacity,
    GetHostsByQuery) is Peloton's on the wire.  The committed manifest is
    `python -m tests.wire.manifest proto --prefix peloton/private/hostmgr/hostsvc` of
    uber/peloton's protobuf/ tree, cut to those two methods and their own messages (the
    public ones they use are checked above)."""
    expected = json.loads((check.WIRE / "peloton_private_hostsvc.json").read_text())
    root = check.REPO / "proto"
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*.proto"))
    ours = manifest.proto_manifest(manifest.compile_descriptor_set(root, files),
                                   ("peloton/private/hostmgr/hostsvc",), closure=False)
    problems = check.diff(expected, ours)
    assert problems == [], "\n".join(problems[:50])


def test_thrift_matches_aurora_manifest() -> None:
    expected = json.loads(check.THRIFT_MANIFEST.read_text())
    problems = check.diff(expected, check.ours_thrift())
    assert problems == [], "\n".join(problems[:50])


def test_manifest_covers_every_promised_service() -> None:
    doc = json.loads(check.PROTO_MANIFEST.read_text())
    for svc in ("peloton.api.v0.job.JobManager", "peloton.api.v0.task.TaskManager",
                "peloton.api.v0.respool.ResourceManager", "peloton.api.v0.update.svc.UpdateService",
                "peloton.api.v0.host.svc.HostService", "peloton.api.v0.volume.svc.VolumeService",
                "peloton.api.v1alpha.job.stateless.svc.JobService",
                "peloton.api.v1alpha.pod.svc.PodService", "peloton.api.v1alpha.watch.svc.WatchService",
                "peloton.api.v1alpha.admin.svc.AdminService"):
        assert svc in doc["services"], svc
    aurora = json.loads(check.THRIFT_MANIFEST.read_text())
    assert set(aurora["services"]) == {"ReadOnlyScheduler", "AuroraSchedulerManager", "AuroraAdmin"}
    assert {"8", "9", "10", "21"} <= set(aurora["structs"]["TaskConfig"]["fields"])


def test_renumbered_proto_field_is_caught(tmp_path: Path) -> None:
    root = tmp_path / "proto"
    shutil.copytree(check.REPO / "proto", root)
    job = root / "peloton" / "api" / "v0" / "job" / "job.proto"
    text = job.read_text()
    changed = re.sub(r"(\binstanceCount\s*=\s*)(\d+)", lambda m: f"{m.group(1)}{int(m.group(2)) + 100}",
                     text, count=1)
    assert changed != text
    job.write_text(changed)
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*.proto"))
    ours = manifest.proto_manifest(manifest.compile_descriptor_set(root, files), check.PROTO_PREFIXES)
    problems = check.diff(json.loads(check.PROTO_MANIFEST.read_text()), ours)
    assert any("instanceCount/number" in p for p in problems), problems


def test_renumbered_thrift_field_is_caught(tmp_path: Path) -> None:
    idl = (check.REPO / "thrift" / "api.thrift").read_text()
    changed = re.sub(r"\b8:\s*optional\s+double\s+numCpus", "108: optional double numCpus", idl)
    if changed == idl:
        pytest.fail("legacy TaskConfig.numCpus declaration not found in thrift/api.thrift")
    path = tmp_path / "api.thrift"
    path.write_text(changed)
    ours = manifest.thrift_manifest(manifest._load_thrift(str(path), "mutated"))
    problems = check.diff(json.loads(check.THRIFT_MANIFEST.read_text()), ours)
    assert any("TaskConfig/fields/8" in p for p in problems), problems
