"""Run the test suite as several pytest processes sharing one run (`make test`).

Most of the suite's time is spent waiting on what the tests start (daemons coming up, real
ZooKeeper, PostgreSQL, Cassandra and Kubernetes servers, updates with real watch times), so
one pytest process leaves the machine's cores idle much of the run.  This starts SHARDS
processes with the tests/harness/shard_claims.py plugin: they split the modules between them
while they run, shard 0 from the first module, the others from the last.

Shard 0 prints to the terminal as it goes; the others write to a log each, printed in full
when they end, so every failure and every summary is shown.  The run fails when any shard
fails, or when the shards' lists of tests collected differ or some collected test did not
run exactly once (a test passed over by every shard must not vanish silently).

    python scripts/pytest_shards.py [--shards N] [-- PYTEST_ARGS...]

`--shards 1` is a plain pytest run.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

PLUGIN = "tests.harness.shard_claims"


def check_every_test_ran_once(claims: Path, shards: int) -> list[str]:
    """Problems with the shards' records: differing collections, or a collected test run by
    no shard or by several."""
    collected = [(claims / f"collected-{i}.txt") for i in range(shards)]
    ran = [(claims / f"ran-{i}.txt") for i in range(shards)]
    missing = [p.name for p in collected + ran if not p.exists()]
    if missing:
        return [f"shard records missing: {', '.join(missing)} (a shard ended early)"]
    lists = [p.read_text().splitlines() for p in collected]
    problems = [f"shard {i} collected {len(lst)} tests, shard 0 {len(lists[0])}"
                for i, lst in enumerate(lists) if sorted(lst) != sorted(lists[0])]
    counts = Counter(nodeid for p in ran for nodeid in p.read_text().splitlines())
    never = [nodeid for nodeid in lists[0] if counts[nodeid] == 0]
    twice = [nodeid for nodeid, n in counts.items() if n > 1]
    if never:
        problems.append(f"{len(never)} tests ran in no shard, e.g. {never[:5]}")
    if twice:
        problems.append(f"{len(twice)} tests ran in several shards, e.g. {twice[:5]}")
    return problems


def main() -> int:
    """Start the shards, wait for all of them, print their logs, check the records."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("pytest_args", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    extra = [a for a in args.pytest_args if a != "--"]
    if args.shards <= 1:
        return subprocess.call([sys.executable, "-m", "pytest", *extra])

    claims = Path(tempfile.mkdtemp(prefix="pytest-shards-"))
    procs: list[subprocess.Popen[bytes]] = []
    logs: list[Path] = []
    try:
        for i in range(args.shards):
            # `--opt=value` in one word: a separate value looking like a path would count as a
            # test path when pytest picks its rootdir (before plugins' options are known), and
            # /tmp/... then made /tmp the rootdir and pyproject.toml's settings unread.
            cmd = [sys.executable, "-m", "pytest", "-p", PLUGIN, f"--shard-claims={claims}",
                   f"--shard-index={i}", *extra]
            if i == 0:
                procs.append(subprocess.Popen(cmd))
                continue
            log = claims / f"shard-{i}.log"
            logs.append(log)
            with log.open("wb") as out:
                procs.append(subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT))
        codes = [p.wait() for p in procs]
    except KeyboardInterrupt:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
        for p in procs:
            p.wait()
        raise
    for i, log in enumerate(logs, start=1):
        print(f"\n{'=' * 30} shard {i} of {args.shards} (its full output) {'=' * 30}",
              flush=True)
        sys.stdout.write(log.read_text(errors="replace"))
    problems = check_every_test_ran_once(claims, args.shards)
    ran = [len((claims / f"ran-{i}.txt").read_text().splitlines())
           if (claims / f"ran-{i}.txt").exists() else 0 for i in range(args.shards)]
    print(f"\nshards: exit codes {codes}, tests run per shard {ran}", flush=True)
    for problem in problems:
        print(f"SHARDS: {problem}", flush=True)
    shutil.rmtree(claims, ignore_errors=True)
    # pytest's code 5 ("no tests collected") from a shard that found everything claimed is
    # not a failure when the records show every test ran.
    failed = [c for c in codes if c not in (0, 5)] or (all(c == 5 for c in codes) and [5])
    return 1 if failed or problems else 0


if __name__ == "__main__":
    sys.exit(main())
