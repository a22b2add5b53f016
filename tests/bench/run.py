"""`make bench`: run every benchmark module and rewrite docs/benchmarks.md.

Each module `tests/bench/bench_*.py` is run as its own process (so one
benchmark's memory or gevent state cannot colour another's) and prints
lines of the form

    BENCH <name> <value> <unit> [target=<op><number>] [note=<free text>]

e.g. `BENCH placement.5k_hosts.tasks_per_s 7312.4 tasks/s target=>=5000`.
This runner collects them, echoes them, and writes a table with the
machine, the command and each number against its target.  Benchmarks
never fail the build on time; a number short of its target is reported
as such.  `BENCH_ONLY=placement,storage make bench` runs a subset.
"""

from __future__ import annotations

import os
import platform
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "benchmarks.md"
LINE = re.compile(r"^BENCH (\S+) ([-0-9.eE+]+) (\S+)(.*)$")
#: A benchmark that could not run says so: `BENCH_SKIP <name> <why>`.
SKIP = re.compile(r"^BENCH_SKIP (\S+) (.*)$")
#: Whole-suite budget; each module gets what is left, at most its own cap.
TOTAL_BUDGET_S = 900
MODULE_CAP_S = 240
#: Long modules: only with BENCH_SCALE=full or when named in BENCH_ONLY, after the others,
#: each with its own cap, outside the suite budget (one simulated day of a 10,000-host
#: cluster takes minutes by design; `make bench` stays within its quarter hour without it).
#: bench_k8s makes 5,000 kwok nodes and twice 10,000 pods on a real API server: about
#: 8 minutes on 2 cores, most of it the API server's and kwok's own work.
#: bench_forecast replays two traces many times over (about 6 minutes on 2 cores).
#: bench_scale_members starts `peloton up --jobmgrs N` twice (N = 1, 2) and runs the scale
#: shape through each: about 5 minutes at 100,000 tasks, up to 45 at the full 1,000,000 (its
#: own deadlines end it before the cap, so its daemons are always stopped).
#: bench_member_failover starts `peloton up --jobmgrs 2` twice and takes a member down in
#: each (SIGTERM, kill -9): 1 to 2 minutes, its waits bounded by deadlines within the cap.
#: bench_leave_under_load runs the scale shape on three such clusters (nobody leaving, a
#: SIGTERM, a kill -9): 1 to 2 minutes each.
LONG_MODULES: dict[str, int] = {"bench_simulation_day": 1200, "bench_k8s": 1200,
                                "bench_leave_under_load": 720,
                                "bench_forecast": 900,
                                "bench_scale_members": 3000 if os.environ.get(
                                    "BENCH_SCALE") == "full" else 720,
                                "bench_member_failover": 400}
#: Long modules every `make bench` runs all the same, after the others and outside the suite
#: budget: the Kubernetes figures (issue 21), the forecast's accuracy (issue 26), the
#: scale shape with 1 and 2 job managers, a member's failover and a member leaving under load
#: (issue 24) belong in every run.
ALWAYS_LONG = frozenset({"bench_k8s", "bench_forecast", "bench_scale_members",
                         "bench_member_failover", "bench_leave_under_load"})


@dataclass
class Result:
    """One measured number."""

    module: str
    name: str
    value: float
    unit: str
    target: str = ""
    note: str = ""

    def verdict(self) -> str:
        """'met', 'short' or '' when there is no target."""
        m = re.match(r"(>=|<=)([-0-9.eE+]+)", self.target)
        if not m:
            return ""
        bound = float(m.group(2))
        ok = self.value >= bound if m.group(1) == ">=" else self.value <= bound
        return "met" if ok else "SHORT"


def parse(module: str, text: str) -> list[Result]:
    """Extract BENCH lines from a module's output."""
    out = []
    for line in text.splitlines():
        m = LINE.match(line.strip())
        if not m:
            continue
        extra = m.group(4)
        target = re.search(r"target=(\S+)", extra)
        note = re.search(r"note=(.*)$", extra)
        out.append(Result(module, m.group(1), float(m.group(2)), m.group(3),
                          target.group(1) if target else "",
                          note.group(1).strip() if note else ""))
    return out


def machine() -> str:
    """One line describing where the numbers were taken."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        mem = f", {kb / 1024 / 1024:.0f} GiB RAM"
    except (OSError, ValueError, IndexError):
        pass
    return (f"{os.cpu_count()} x {cpu}{mem}, {platform.system()} {platform.release()}, "
            f"Python {platform.python_version()}")


def main() -> int:
    only = {s for s in os.environ.get("BENCH_ONLY", "").split(",") if s}
    modules = sorted(p.stem for p in Path(__file__).parent.glob("bench_*.py"))
    if only:
        modules = [m for m in modules if m.removeprefix("bench_") in only]
    start = time.monotonic()
    results: list[Result] = []
    failures: list[str] = []
    long_wanted = os.environ.get("BENCH_SCALE") == "full"
    long_skipped = [m for m in modules if m in LONG_MODULES and m not in ALWAYS_LONG
                    and not long_wanted and not only]
    modules = ([m for m in modules if m not in LONG_MODULES]
               + [m for m in modules if m in LONG_MODULES and m not in long_skipped])
    for mod in modules:
        left = TOTAL_BUDGET_S - (time.monotonic() - start)
        if mod in LONG_MODULES:
            left = LONG_MODULES[mod]
        elif left < 10:
            failures.append(f"{mod}: skipped, suite budget used up")
            continue
        t0 = time.monotonic()
        print(f"== {mod}", flush=True)
        try:
            proc = subprocess.run([sys.executable, "-m", f"tests.bench.{mod}"], cwd=REPO,
                                  capture_output=True, text=True,
                                  timeout=min(LONG_MODULES.get(mod, MODULE_CAP_S), left))
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout if isinstance(exc.stdout, str) else ""
            results.extend(parse(mod, out))
            failures.append(f"{mod}: timed out after {time.monotonic() - t0:.0f}s")
            continue
        got = parse(mod, proc.stdout)
        for line in proc.stdout.splitlines():
            if (m := SKIP.match(line.strip())) is not None:
                print(f"SKIPPED {m.group(1)}: {m.group(2)}", flush=True)
                failures.append(f"{m.group(1)} not measured: {m.group(2)}")
        for r in got:
            print(f"BENCH {r.name} {r.value:g} {r.unit} {r.target} {r.verdict()}", flush=True)
        results.extend(got)
        if proc.returncode != 0:
            failures.append(f"{mod}: exit {proc.returncode}: {proc.stderr.strip()[-400:]}")
        print(f"   ({time.monotonic() - t0:.1f}s)", flush=True)
    for mod in long_skipped:
        print(f"SKIPPED {mod}: long; run with BENCH_SCALE=full or BENCH_ONLY="
              f"{mod.removeprefix('bench_')}", flush=True)
    total = time.monotonic() - start
    write_doc(results, failures, total)
    for f in failures:
        print("FAILED", f, file=sys.stderr)
    print(f"wrote {DOC.relative_to(REPO)} ({len(results)} numbers, {total:.0f}s)")
    return 0


def write_doc(results: list[Result], failures: list[str], total: float) -> None:
    """Rewrite docs/benchmarks.md from this run."""
    lines = [
        "# Benchmarks",
        "",
        "Written by `make bench` (tests/bench/run.py); do not edit by hand.",
        "",
        f"- Machine: {machine()}",
        f"- Date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        f"- Command: `make bench` (whole suite {total:.0f} s)",
        "",
        "| benchmark | value | unit | target | verdict | note |",
        "|---|---:|---|---|---|---|",
    ]
    for r in results:
        lines.append(f"| {r.name} | {r.value:,.4g} | {r.unit} | {r.target} | {r.verdict()} "
                     f"| {r.note} |")
    if failures:
        lines += ["", "## Problems in this run", ""] + [f"- {f}" for f in failures]
    notes = DOC.with_name("benchmarks-notes.md")
    if notes.exists():
        lines += ["", notes.read_text().strip()]
    DOC.parent.mkdir(exist_ok=True)
    DOC.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
