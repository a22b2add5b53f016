"""`.aurora` files as Aurora's client reads them (aurorabridge/client): loading, bindings,
include(), templates left for run time, and errors that name file:line and the field.

The configs here are written for these tests; they use the constructs of Aurora's tutorial and
configuration reference (Process, Task, SequentialTask, Resources, Service, Job, UpdateConfig,
profiles bound with .bind(), `{{mesos.instance}}`, `{{thermos.ports[http]}}`, include())."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from aurorabridge.client.config import JobConfig, get_config
from aurorabridge.client.errors import ConfigError
from aurorabridge.client.loader import load, loads_json, parse_binding

HELLO = """\
# a two-instance service whose second process serves on the http port
setup = Process(name = 'setup', cmdline = 'echo instance {{mesos.instance}} > id.txt')
serve = Process(name = 'serve', cmdline = 'python3 -m http.server {{thermos.ports[http]}}')
task = SequentialTask(processes = [setup, serve],
                      resources = Resources(cpu = 0.25, ram = 64*MB, disk = 32*MB))
jobs = [Service(cluster = 'devcluster', role = 'www-data', environment = 'devel',
                name = 'hello', instances = 2, task = task)]
"""


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def problems(exc: pytest.ExceptionInfo[ConfigError]) -> list[tuple[str, int | None, str]]:
    return [(Path(p.path).name, p.line, p.field) for p in exc.value.problems]


def config(tmp_path: Path, text: str, name: str | None = None, **kw: Any) -> JobConfig:
    return get_config(write(tmp_path, "job.aurora", text), name, **kw)


def data(cfg: JobConfig) -> dict[str, Any]:
    return dict(json.loads(cfg.job().taskConfig.executorConfig.data))


def test_a_config_loads_and_keeps_run_time_templates(tmp_path: Path) -> None:
    cfg = config(tmp_path, HELLO)
    assert (cfg.cluster(), cfg.role(), cfg.environment(), cfg.name()) == (
        "devcluster", "www-data", "devel", "hello")
    doc = data(cfg)
    cmds = [p["cmdline"] for p in doc["task"]["processes"]]
    assert cmds == ["echo instance {{mesos.instance}} > id.txt",
                    "python3 -m http.server {{thermos.ports[http]}}"]
    assert doc["task"]["constraints"] == [{"order": ["setup", "serve"]}]  # SequentialTask
    assert "instances" not in doc and "update_config" not in doc
    assert [r.namedPort for r in cfg.job().taskConfig.resources if r.namedPort] == ["http"]


def test_a_missing_required_field_names_the_line_that_made_the_object(tmp_path: Path) -> None:
    text = HELLO.replace("Process(name = 'setup', cmdline = 'echo instance {{mesos.instance}} > id.txt')",
                         "Process(name = 'setup')")
    with pytest.raises(ConfigError) as exc:
        config(tmp_path, text)
    assert problems(exc) == [("job.aurora", 2, "jobs[0].task.processes[0].cmdline")]
    assert "is required" in str(exc.value)
    assert str(exc.value).startswith(f"{tmp_path / 'job.aurora'}:2: jobs[0].task.processes[0].cmdline:")


def test_a_value_of_the_wrong_type_names_its_field(tmp_path: Path) -> None:
    text = HELLO.replace("cpu = 0.25", "cpu = 'a quarter'")
    with pytest.raises(ConfigError) as exc:
        config(tmp_path, text)
    assert problems(exc) == [("job.aurora", 5, "jobs[0].task.resources.cpu")]
    assert "Cannot coerce 'a quarter' to Float" in str(exc.value)


def test_an_unbound_template_is_an_error_unless_bound_at_run_time(tmp_path: Path) -> None:
    text = HELLO.replace("http.server", "http.server --directory {{docroot}}")
    with pytest.raises(ConfigError) as exc:
        config(tmp_path, text)
    assert problems(exc) == [("job.aurora", 3, "jobs[0].task.processes[1].cmdline")]
    assert "unbound template variable {{docroot}}" in str(exc.value)
    bound = config(tmp_path, text, bindings=[parse_binding("docroot=/srv")])
    assert "--directory /srv {{thermos.ports[http]}}" in data(bound)["task"]["processes"][1]["cmdline"]


def test_an_unknown_field_is_refused_at_its_line_with_the_closest_name(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as exc:
        config(tmp_path, HELLO.replace("cmdline = 'python3", "cmdlin = 'python3"))
    assert problems(exc) == [("job.aurora", 3, "Process.cmdlin")]
    assert "did you mean cmdline?" in str(exc.value)


def test_a_syntax_error_and_a_failing_statement_name_their_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as exc:
        config(tmp_path, HELLO + "if True\n    pass\n")
    assert problems(exc)[0][:2] == ("job.aurora", 8) and "syntax error" in str(exc.value)
    with pytest.raises(ConfigError) as exc:
        config(tmp_path, HELLO + "extra = undefined_helper()\n")
    assert problems(exc) == [("job.aurora", 8, "")]
    assert "NameError" in str(exc.value)


def test_profiles_and_bind_flags(tmp_path: Path) -> None:
    text = """\
class Profile(Struct):
  version = Default(String, 'live')
  copies = Default(Integer, 1)

DEVEL = Profile(copies = 2)
run = Process(name = 'run', cmdline = 'serve --version {{profile.version}}')
TEMPLATE = Service(cluster = 'devcluster', role = 'www-data', environment = 'devel',
                   instances = '{{profile.copies}}',
                   task = Task(processes = [run], resources = Resources(cpu = 1, ram = MB, disk = MB)))
jobs = [TEMPLATE(name = 'web').bind(profile = DEVEL), TEMPLATE(name = 'web-one').bind(profile = Profile())]
"""
    web = config(tmp_path, text, "web")
    assert web.instances() == 2
    assert data(web)["task"]["processes"][0]["cmdline"] == "serve --version live"
    assert config(tmp_path, text, "web-one").instances() == 1
    flagged = config(tmp_path, text, "web", bindings=[parse_binding("profile.version=canary")])
    assert data(flagged)["task"]["processes"][0]["cmdline"] == "serve --version canary"
    with pytest.raises(ConfigError, match="multiple jobs but no job name"):
        config(tmp_path, text)
    with pytest.raises(ConfigError, match=r"Could not find job \*/\*/\*/nope\n") as exc:
        config(tmp_path, text, "nope")
    assert "devcluster/www-data/devel/web-one" in str(exc.value)
    with pytest.raises(ValueError, match="name=value"):
        parse_binding("novalue")


def test_include_runs_a_file_relative_to_the_including_one(tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    write(tmp_path, "lib/common.aurora", """\
def small_task(command):
  return Task(processes = [Process(name = 'main', cmdline = command)],
              resources = Resources(cpu = 0.5, ram = 32*MB, disk = 32*MB))
""")
    write(tmp_path, "lib/base.aurora", "include('common.aurora')\nCLUSTER = 'devcluster'\n")
    cfg = config(tmp_path, """\
include('lib/base.aurora')
jobs = [Job(cluster = CLUSTER, role = 'www-data', environment = 'prod', name = 'batch',
            task = small_task('echo {{greeting}}'))]
""", bindings=[parse_binding("greeting=hi")])
    assert data(cfg)["task"]["processes"][0]["cmdline"] == "echo hi"
    with pytest.raises(ConfigError) as exc:
        config(tmp_path, """\
include('lib/base.aurora')
jobs = [Job(cluster = CLUSTER, role = 'www-data', environment = 'prod', name = 'batch',
            task = small_task('echo {{greeting}}'))]
""")
    # The object holding the field was made in the included file.
    assert problems(exc) == [("common.aurora", 2, "jobs[0].task.processes[0].cmdline")]
    with pytest.raises(ConfigError) as exc:
        config(tmp_path, "\ninclude('missing.aurora')\n")
    assert problems(exc) == [("job.aurora", 2, "")] and "no such file" in str(exc.value)


def test_aurora_rules_on_values(tmp_path: Path) -> None:
    cases = {
        "ram = 64*MB": ("ram = 0", "jobs[0].task.resources", "must all be positive"),
        "role = 'www-data'": ("role = 'www data'", "jobs[0].role", "Invalid role 'www data'"),
        "instances = 2,": ("instances = 2, update_config = UpdateConfig(max_total_failures = 2),",
                           "jobs[0].update_config.max_total_failures", "lesser than the job size"),
        "name = 'setup'": ("name = 'serve'", "jobs[0].task.processes[1].name", "duplicate process name"),
    }
    for old, (new, fld, message) in cases.items():
        with pytest.raises(ConfigError) as exc:
            config(tmp_path, HELLO.replace(old, new))
        assert [p.field for p in exc.value.problems] == [fld], (new, exc.value)
        assert message in str(exc.value)
    with pytest.raises(ConfigError, match="pulse_interval_secs: Pulse interval seconds must be at least 60"):
        config(tmp_path, HELLO.replace("instances = 2,",
                                       "instances = 2, update_config = UpdateConfig(pulse_interval_secs=5),"))
    with pytest.raises(ConfigError, match="cycle among setup, work"):
        config(tmp_path, """\
p1 = Process(name = 'setup', cmdline = 'true')
p2 = Process(name = 'work', cmdline = 'true')
jobs = [Job(cluster = 'c', role = 'r', environment = 'e', name = 'n',
            task = Task(processes = [p1, p2], constraints = order(p1, p2) + order(p2, p1),
                        resources = Resources(cpu = 1, ram = MB, disk = MB)))]
""")


def test_a_file_without_jobs(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="No job defined"):
        load(write(tmp_path, "empty.aurora", "x = 1\n"))


def test_json_configs_round_trip(tmp_path: Path) -> None:
    cfg = config(tmp_path, HELLO)
    text = json.dumps({"jobs": [json.loads(cfg.raw().json_dumps())]})
    again = get_config(write(tmp_path, "job.json", text), "hello", read_json=True)
    assert again.job() == cfg.job()
    single = get_config(write(tmp_path, "one.json", cfg.raw().json_dumps()), "hello", read_json=True)
    assert single.job() == cfg.job()
    with pytest.raises(ConfigError) as exc:
        loads_json('{"jobs": [{"nmae": "x"}]}', "bad.json")
    assert [p.field for p in exc.value.problems] == ["jobs[0].MesosJob.nmae"]
    with pytest.raises(ConfigError) as exc:
        loads_json('{\n  "jobs": [\n}', "broken.json")
    assert exc.value.problems[0].line == 3


def test_helpers(tmp_path: Path) -> None:
    cfg = config(tmp_path, """\
a = SimpleTask('a', 'echo a')
b = SimpleTask('b', 'echo b')
both = concat_tasks(a, b)
side = combine_tasks(a, b)
jobs = [Job(cluster = 'c', role = 'r', environment = 'e', name = 'seq', task = both),
        Job(cluster = 'c', role = 'r', environment = 'e', name = 'par', task = side(name = 'par'),
            contact = java_options('server', Xmx = '1g') + ' ' + python_options('v', port = 8))]
""", "seq")
    assert data(cfg)["task"]["constraints"] == [{"order": ["a", "b"]}]
    resources = {r.numCpus for r in cfg.job().taskConfig.resources if r.numCpus}
    assert resources == {1.0}  # concat: the largest
    par = config(tmp_path, (tmp_path / "job.aurora").read_text(), "par")
    assert {r.numCpus for r in par.job().taskConfig.resources if r.numCpus} == {2.0}  # combine: the sum
    assert par.job().taskConfig.contactEmail == "-server -Xmx 1g -v --port 8"
