"""An Aurora task's Announcer -> the pod labels that ask for service discovery (atop/announce.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from aurorabridge import validation
from aurorabridge.atop.announce import announce_labels
from aurorabridge.atop.job_key import JobKey
from aurorabridge.atop.pod_spec import pod_spec
from aurorabridge.config import ValidationSettings
from peloton.core.errors import InvalidArgument
from peloton.core.model.announce import (
    ANNOUNCE_LABEL,
    PORTMAP_LABEL,
    PRIMARY_PORT_LABEL,
    Announce,
    announce_of,
    serverset_path,
)
from tests.unit.aurorabridge import builders as b

KEY = JobKey("www", "prod", "hello")


def announced(announce: Any) -> Any:
    """A task of `KEY` with `announce` in its Thermos data (absent when None)."""
    task = b.task_config("www", "prod", "hello", ports=("http", "admin"))
    doc = json.loads(task.executorConfig.data)
    if announce is not None:
        doc["announce"] = announce
    task.executorConfig.data = json.dumps(doc)
    return task


def as_dict(labels: list[Any]) -> dict[str, str]:
    return {lab.key: lab.value for lab in labels}


def test_no_announcer_no_labels() -> None:
    assert announce_labels(announced(None), KEY) == []
    task = b.task_config()
    task.executorConfig = None
    assert announce_labels(task, KEY) == []


def test_default_announcer_lands_where_auroras_executor_puts_it() -> None:
    labels = as_dict(announce_labels(announced({}), KEY))
    assert labels == {ANNOUNCE_LABEL: "www/prod/hello", PRIMARY_PORT_LABEL: "http",
                      PORTMAP_LABEL: '{"aurora":"http"}'}
    found = announce_of(announce_labels(announced({}), KEY))
    assert found is not None and serverset_path(found, "/aurora", "www/prod/hello") == \
        "/aurora/www/prod/hello"


def test_the_clients_interpolated_section_and_zk_path() -> None:
    section = {"primary_port": "admin", "portmap": {"aurora": "{{primary_port}}", "https": 443},
               "zk_path": "/services/hello"}
    found = announce_of(announce_labels(announced(section), KEY))
    assert found == Announce("/services/hello", "admin", (("aurora", "admin"), ("https", 443)))


@pytest.mark.parametrize("section, field", [
    ({"zk_path": "relative/path"}, "executorConfig.data.announce.zk_path"),
    ({"zk_path": "/a/../b"}, "executorConfig.data.announce.zk_path"),
    ({"portmap": ["http"]}, "executorConfig.data.announce.portmap"),
    ({"portmap": {"x": True}}, "executorConfig.data.announce.portmap"),
    ({"primary_port": 80}, "executorConfig.data.announce.primary_port"),
])
def test_bad_sections_are_refused_naming_the_field(section: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidArgument) as err:
        announce_labels(announced(section), KEY)
    assert err.value.field == field


def test_the_pod_spec_carries_the_labels() -> None:
    checked = validation.check_task(announced({}), 1, ValidationSettings())
    spec = pod_spec(checked.task, checked.key, checked.resources)
    assert as_dict(list(spec.labels))[ANNOUNCE_LABEL] == "www/prod/hello"
    plain = validation.check_task(announced(None), 1, ValidationSettings())
    assert ANNOUNCE_LABEL not in as_dict(list(pod_spec(plain.task, plain.key, plain.resources).labels))
