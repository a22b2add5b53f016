"""The web UI end to end: a real `peloton up` (which serves the UI), the CLI, and real headless Chromium.

The pages are loaded in Chromium and the DOM their scripts built is read
back: the job list, the job's tasks and their states, the task's log text,
pools and hosts.  Then a job is stopped through the UI's JSON API (what
the Stop button posts) and the job page is seen to show it stopped.  The forecast panel is
asked on a waiting job's job and task pages and compared with the JSON API's answer, and seen
to say why when there is no forecast (nothing pending, or no answer within the page's wait).
"""

from __future__ import annotations

import json
import re
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from peloton.api.gen.peloton.api.v0.task import task_pb2
from tests.e2e.conftest import write_job, write_pool
from tests.e2e.test_batch_jobs import create
from tests.harness.browser import Browser, Element, chromium, render
from tests.harness.cluster import UpCluster, eventually

pytestmark = [
    pytest.mark.e2e, pytest.mark.timeout(180),
    pytest.mark.skipif(chromium() is None, reason="CHROMIUM NOT INSTALLED: the UI's browser tests need "
                       "Debian's chromium (make test installs it via scripts/ensure_system_packages.sh)"),
]


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[UpCluster, str]]:
    """A one-agent cluster with a pool and a two-task job whose tasks print and then sleep."""
    base = tmp_path_factory.mktemp("ui")
    cluster = UpCluster(base, agents=1, extra=["--agent-cpus", "2", "--agent-mem-mb", "4096",
                                               "--agent-disk-mb", "100000"]).start()
    try:
        assert f"web UI        http://127.0.0.1:{cluster.ui_port}/" in cluster.log()
        cluster.cli("respool", "create", "/uipool", str(write_pool(base, "uipool")))
        job_id = create(cluster, "/uipool", write_job(
            base, "ui-hello", 'echo "hello from ui $PELOTON_INSTANCE_ID"; echo "to stderr" >&2; sleep 600',
            count=2))
        eventually(lambda: running(cluster, job_id), 60, "both tasks RUNNING")
        yield cluster, job_id
    finally:
        cluster.close()


def running(cluster: UpCluster, job_id: str) -> bool:
    tasks = cluster.client.list_tasks(job_id).result.value
    return len(tasks) == 2 and all(t.runtime.state == task_pb2.RUNNING for t in tasks.values())


def page(cluster: UpCluster, path: str) -> Element:
    dom = render(f"http://127.0.0.1:{cluster.ui_port}{path}")
    banner = dom.find(id="banner")
    assert "hidden" in banner.attrs, f"the page shows an error: {banner.text}"
    return dom


def test_jobs_job_and_task_pages_show_the_job_its_tasks_and_their_logs(up: tuple[UpCluster, str]) -> None:
    cluster, job_id = up
    jobs = page(cluster, "/jobs?name=ui-hello")
    link = jobs.find("a", data_job_id=job_id)
    assert link.text == "ui-hello" and link.attrs["href"] == f"/jobs/{job_id}"
    [row] = jobs.rows()
    assert row[:3] == ["ui-hello", "RUNNING", "BATCH"] and "/uipool" in row and "RUNNING 2" in row

    job = page(cluster, f"/jobs/{job_id}")
    assert job.find("h1").text.startswith("ui-hello")
    tasks = job.rows(lambda t: "Ports" in t.text)
    assert [(r[0], r[1], r[3]) for r in tasks] == [("0", "RUNNING", "localhost"),
                                                   ("1", "RUNNING", "localhost")]

    task = page(cluster, f"/jobs/{job_id}/tasks/1")
    assert task.find("pre", data_log="stdout").text.strip() == "hello from ui 1"
    assert task.find("pre", data_log="stderr").text.strip() == "to stderr"
    assert any(r[1] == "RUNNING" for r in task.rows())  # pod events


def test_overview_pools_and_hosts_pages(up: tuple[UpCluster, str]) -> None:
    cluster, _ = up
    overview = page(cluster, "/")
    hosts_card = overview.find("section", aria_label="Hosts")
    assert hosts_card.find("span", data_state="UP").text == "UP 1"
    tasks_card = overview.find("section", aria_label="Tasks")
    assert tasks_card.find("span", data_state="RUNNING").text.startswith("RUNNING")
    pools = page(cluster, "/pools")
    assert pools.find("span", data_pool="/uipool").text == "uipool"
    hosts = page(cluster, "/hosts")
    [row] = hosts.rows()
    assert row[0] == "localhost" and row[2] == "UP" and row[-1] == "Start maintenance"


def test_stopping_the_job_through_the_ui_api_shows_on_its_page(up: tuple[UpCluster, str]) -> None:
    cluster, job_id = up
    base = f"http://127.0.0.1:{cluster.ui_port}"
    # As the page does: its session cookie, and the CSRF token the page embeds.
    with urllib.request.urlopen(f"{base}/jobs/{job_id}", timeout=20) as response:
        cookie = response.headers["Set-Cookie"].split(";")[0]
        csrf = re.search(r'name="peloton-csrf" content="([^"]+)"', response.read().decode())
    assert csrf is not None
    request = urllib.request.Request(f"{base}/ui/api/jobs/{job_id}/stop", data=b"{}", method="POST",
                                     headers={"Content-Type": "application/json", "Origin": base,
                                              "Cookie": cookie, "X-CSRF-Token": csrf.group(1)})
    with urllib.request.urlopen(request, timeout=20) as response:
        assert json.loads(response.read())["message"] == f"Stopping 2 instances of job {job_id}"

    def stopped() -> Element | None:
        dom = page(cluster, f"/jobs/{job_id}")
        states = [r[1] for r in dom.rows(lambda t: "Ports" in t.text)]
        return dom if states == ["KILLED", "KILLED"] else None

    dom = eventually(stopped, 60, "the job page showing both tasks KILLED", interval=1.0)
    assert dom.find("h1").find("span", data_state="KILLED")


def test_clicking_stop_asks_first_then_the_page_refreshes_to_killed(up: tuple[UpCluster, str],
                                                                   tmp_path: Path) -> None:
    cluster, _ = up
    job_id = create(cluster, "/uipool", write_job(tmp_path, "ui-click", "sleep 600", count=1))
    eventually(lambda: cluster.client.list_tasks(job_id).result.value[0].runtime.state == task_pb2.RUNNING,
               60, "the task RUNNING")
    browser = Browser()
    try:
        tab = browser.open(f"http://127.0.0.1:{cluster.ui_port}/jobs/{job_id}")
        stop = 'document.querySelector(\'button[data-action$="/stop"]\')'
        browser.wait_for(tab, f"document.body.dataset.loaded === 'true' && {stop} !== null", 30)
        browser.evaluate(tab, f"{stop}.click()")
        assert browser.evaluate(tab, "document.getElementById('confirm').open") is True
        title = browser.evaluate(tab, "document.getElementById('confirm-title').textContent")
        assert title == "Stop job ui-click?"
        assert cluster.client.list_tasks(job_id).result.value[0].runtime.goalState != task_pb2.KILLED
        browser.evaluate(tab, "document.getElementById('confirm-ok').click()")
        toast = browser.wait_for(tab, "!document.getElementById('toast').hidden && "
                                      "document.getElementById('toast').textContent", 20)
        assert toast == f"Stopping 1 instance of job {job_id}"
        # No reload: the page's own refresh brings the new state.
        browser.wait_for(tab, "document.querySelector('h1 .state').dataset.state === 'KILLED'", 60)
    finally:
        browser.close()


def test_a_waiting_job_says_why_on_its_job_and_task_pages(up: tuple[UpCluster, str],
                                                          tmp_path: Path) -> None:
    cluster, _ = up
    made = cluster.cli("job", "create", "/uipool", str(write_job(tmp_path, "ui-big", "sleep 1", cpu=500)),
                       "--queue-anyway")
    big = made.stdout.split()[1]
    dom = eventually(lambda: (d := page(cluster, f"/jobs/{big}")).find_all("li", data_waiting="0") and d,
                     30, "the job page explaining its waiting task", interval=1.0)
    why = dom.find("section", aria_labelledby="why-title")
    assert "Why tasks wait" in why.text and "/uipool: entitled to" in why.text
    assert "largest localhost" in why.text
    [waiting] = why.find_all("li", data_waiting="0")
    assert "unplaceable: no UP host could hold it now: it asks for 500 cpu" in waiting.text
    [row] = dom.rows(lambda t: "Ports" in t.text)
    assert row[1] == "PENDING" and "unplaceable" in row[-1]
    task = page(cluster, f"/jobs/{big}/tasks/0")
    assert "it asks for 500 cpu" in task.find("p", data_why="true").text
    crumbs = task.find("p", **{"class": "breadcrumbs"})
    assert crumbs.find("a", href=f"/jobs/{big}").text == "ui-big"
    cluster.cli("job", "stop", big)


def test_hosts_overview_and_pools_show_capacity(up: tuple[UpCluster, str]) -> None:
    cluster, _ = up
    hosts = page(cluster, "/hosts")
    cpu = hosts.find("span", data_kind="cpu").text
    assert cpu.endswith("/ 2"), cpu
    assert "Cluster (UP hosts): cpu" in hosts.find("p", data_cluster="true").text
    overview = page(cluster, "/")
    assert overview.find("span", data_capacity="cpu").text == "2"
    pools = page(cluster, "/pools")
    assert pools.find("span", data_entitled="/uipool").text.endswith("GB") or \
        "cpu" in pools.find("span", data_entitled="/uipool").text
    assert "tasks" in pools.find("span", data_queued="/uipool").text
    assert overview.find("a", href="/ui/api/").text == "JSON API"


def test_unknown_pages_and_bad_job_ids_show_not_found_and_stop_asking(up: tuple[UpCluster, str]) -> None:
    cluster, _ = up
    nowhere = page(cluster, "/nowhere")
    assert "No page at /nowhere" in nowhere.find("section", data_not_found="true").text
    bad = page(cluster, "/jobs/not-a-job")
    assert "is not a job id" in bad.find("section", data_not_found="true").text
    browser = Browser()
    try:
        tab = browser.open(f"http://127.0.0.1:{cluster.ui_port}/jobs/0000dead-0000-4000-8000-000000000000")
        browser.wait_for(tab, "document.querySelector('[data-not-found]') !== null", 30)
        count = ("performance.getEntriesByType('resource')"
                 ".filter((e) => e.name.includes('/ui/api/jobs/')).length")
        first = browser.evaluate(tab, count)
        time.sleep(5)  # more than two refresh periods: a page that retried would have asked again
        assert browser.evaluate(tab, count) == first == 1
    finally:
        browser.close()


# -- the forecast panel (ui/static/js/forecast.js) ----------------------------------------------
ASK = "document.querySelector('[data-forecast=ask]')"
#: The panel's answer once it has one (data-state done or failed), as a JSON value; null before.
ANSWER = """(() => {
  const out = document.querySelector('[data-forecast=result]');
  if (!out || !['done', 'failed'].includes(out.dataset.state)) return null;
  const facts = {};
  for (const dt of out.querySelectorAll('dt')) facts[dt.textContent] = dt.nextElementSibling.textContent;
  const banner = document.getElementById('banner');
  return {state: out.dataset.state, facts,
          changes: [...out.querySelectorAll('[data-forecast=changes] li')].map((li) => li.textContent),
          error: out.querySelector('[data-forecast=error]')?.textContent ?? null,
          banner: banner.hidden ? null : banner.textContent, asking_again: !ASK.disabled};
})()""".replace("ASK", ASK)
_SPAN = r"(?:now|\d+s|\d+m\d\ds|\d+h\d\dm|\d+d\d\dh|not within \S+)"
#: A start as the panel writes it: one time, or "<p50> (p50) to <p90> (p90)".
RANGE = re.compile(rf"{_SPAN}(?: \(p50\) to {_SPAN} \(p90\))?")


@pytest.fixture(scope="module")
def forecast_jobs(up: tuple[UpCluster, str],
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """Pool /uifc may use 1 cpu: `busy` (one 1-cpu task sleeping) holds it and `waiting` (two
    1-cpu tasks) queues behind it, both instances PENDING on the pool's limit."""
    cluster, _ = up
    base = tmp_path_factory.mktemp("forecast")
    cluster.cli("respool", "create", "/uifc", str(write_pool(base, "uifc", cpu_limit=1)))
    busy = create(cluster, "/uifc", write_job(base, "ui-fc-busy", "sleep 600", cpu=1))
    eventually(lambda: cluster.client.list_tasks(busy).result.value[0].runtime.state == task_pb2.RUNNING,
               60, "busy RUNNING")
    waiting = create(cluster, "/uifc", write_job(base, "ui-fc-waiting", "true", cpu=1, count=2))
    try:
        eventually(lambda: [t.runtime.state for _, t in sorted(
            cluster.client.list_tasks(waiting).result.value.items())] == [task_pb2.PENDING] * 2,
                   60, "both instances of waiting PENDING")
        yield busy, waiting
    finally:
        cluster.cli("job", "stop", waiting)
        cluster.cli("job", "stop", busy)


def ask_forecast(browser: Browser, tab: str, *, visible: bool = True) -> dict[str, Any]:
    """Wait for the page and its forecast panel, press "Forecast start", wait for the answer."""
    panel = "document.querySelector('section[aria-label=forecast]')"
    browser.wait_for(tab, f"document.body.dataset.loaded === 'true' && {ASK} !== null", 60)
    assert browser.evaluate(tab, f"{panel}.hidden") is (not visible)
    browser.evaluate(tab, f"{ASK}.click()")
    # The forecast runs the scheduler forward for up to 10 s of wall time (ui/reads.py), in a
    # worker process that may be slow to start on a busy machine.
    answer: dict[str, Any] = browser.wait_for(tab, ANSWER, 90)
    assert answer["banner"] is None, f"the page shows an error: {answer['banner']}"
    assert answer["asking_again"], "the button stays disabled after the answer"
    return answer


def api_forecast(cluster: UpCluster, job_id: str, query: str = "") -> dict[str, Any]:
    url = f"http://127.0.0.1:{cluster.ui_port}/ui/api/jobs/{job_id}/forecast{query}"
    with urllib.request.urlopen(url, timeout=90) as response:
        return dict(json.loads(response.read()))


def assert_shows(answer: dict[str, Any], api: dict[str, Any], which: str) -> None:
    """The panel shows the API's answer for the same job: what it is for, the binding
    constraint and the changes that would start it sooner, in the API's order.  Each ask runs
    the forecast afresh (other seeds may finish within the wall time), so the start times are
    checked for form and sense, not compared digit for digit."""
    assert answer["state"] == "done" and answer["error"] is None, answer
    facts = answer["facts"]
    assert facts["For"] == which
    binding = api["binding"]
    assert binding["kind"] == "pool-limit" and "pool /uifc is at its limit" in binding["summary"]
    assert facts["Binding now"] == f"{api['binding']['kind']}: {api['binding']['summary']}"
    assert api["estimate"]["runs"] > 0 and api["estimate"]["p50_secs"] is not None, api
    assert RANGE.fullmatch(facts["Starts"]) and facts["Starts"] != "now", facts["Starts"]
    assert re.fullmatch(r"looked 1d00h ahead, \d+\.\d s of 10 s wall time( \(cut short\))?", facts["Bounds"])
    changes = [c["change"] for c in api["counterfactuals"]]
    assert changes and len(answer["changes"]) == len(changes), (answer["changes"], changes)
    for line, change in zip(answer["changes"], changes, strict=True):
        assert line.startswith(f"{change}: "), (line, change)
        estimate = line.removeprefix(f"{change}: ")
        assert RANGE.fullmatch(estimate) or estimate == "not run within the wall time", line


@pytest.mark.timeout(400)
def test_the_forecast_panel_on_a_waiting_jobs_job_and_task_pages(
        up: tuple[UpCluster, str], forecast_jobs: tuple[str, str]) -> None:
    cluster, _ = up
    _, waiting = forecast_jobs
    browser = Browser(timeout=60)
    try:
        job = browser.open(f"http://127.0.0.1:{cluster.ui_port}/jobs/{waiting}")
        answer = ask_forecast(browser, job)
        assert_shows(answer, api_forecast(cluster, waiting),
                     "the last of 2 pending instances (0, 1)")

        task = browser.open(f"http://127.0.0.1:{cluster.ui_port}/jobs/{waiting}/tasks/1")
        answer = ask_forecast(browser, task)
        assert_shows(answer, api_forecast(cluster, waiting, "?instance=1"), "instance 1")
    finally:
        browser.close()


def test_the_forecast_panel_says_why_when_there_is_no_forecast(
        up: tuple[UpCluster, str], forecast_jobs: tuple[str, str]) -> None:
    cluster, _ = up
    busy, waiting = forecast_jobs
    base = f"http://127.0.0.1:{cluster.ui_port}"
    # An unknown instance has no task page, hence no panel: the page says "not found".
    unknown = page(cluster, f"/jobs/{waiting}/tasks/7")
    assert unknown.find("section", data_not_found="true")
    assert not unknown.find_all("section", aria_label="forecast")
    browser = Browser(timeout=60)
    try:
        # Nothing of busy waits: its pages hide the panel.  A page a refresh behind the cluster
        # (the task started meanwhile) can still ask: the answer says why there is none.
        tab = browser.open(f"{base}/jobs/{busy}")
        answer = ask_forecast(browser, tab, visible=False)
        assert answer["state"] == "failed"
        assert answer["error"] == f"No forecast: job {busy} has no pending task to forecast (not_found)"
        tab = browser.open(f"{base}/jobs/{busy}/tasks/0")
        answer = ask_forecast(browser, tab, visible=False)
        assert answer["state"] == "failed" and answer["error"].startswith("No forecast: ")
        assert answer["error"].endswith(f"of job {busy} has no pending task to forecast (not_found)")

        # A forecast that never answers: the page gives up after its wait and says so.  The
        # server tells its pages 30 s (the forecast's 10 s wall time, the call's grace and
        # slack: ui/reads.py); this page is told 2 s instead, as a server whose forecasts
        # may spend less would tell it, so the test does not sit out the 30 s.
        tab = browser.open(f"{base}/jobs/{waiting}")
        browser.wait_for(tab, f"document.body.dataset.loaded === 'true' && {ASK} !== null", 60)
        wait = "document.querySelector('meta[name=\"peloton-api-timeout-ms\"]')"
        assert browser.evaluate(tab, f"{wait}.content") == "30000"
        browser.evaluate(tab, f"{wait}.content = '2000'")
        browser.hold_requests(tab, "*/forecast*")
        answer = ask_forecast(browser, tab)
        assert answer["state"] == "failed"
        assert answer["error"] == "No forecast: the UI server did not answer within 2s (unavailable)"
    finally:
        browser.close()
