"""Group commit under gevent: with threading monkey-patched, greenlets batch their writes.

Run in a child process, since monkey-patching must happen before anything
imports threading and would leak into every other test of this run.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.harness.procs import REPO

SCRIPT = textwrap.dedent("""
    from gevent import monkey
    monkey.patch_all()
    import dataclasses, gevent
    from peloton.core.model.task import TaskRuntime
    from peloton.storage import GroupCommitter, open_store

    store = open_store("sqlite://")
    store.create_task_runtimes("j", {i: TaskRuntime() for i in range(20)})
    committer = GroupCommitter(store, flush_interval=0.005, max_batch=100)
    committer.start()

    def writer(i):
        rt = store.get_task_runtime("j", i)
        for _ in range(10):
            rt = committer.write("j", i, dataclasses.replace(rt, failure_count=rt.failure_count + 1))

    gevent.joinall([gevent.spawn(writer, i) for i in range(20)], timeout=30, raise_error=True)
    committer.stop()
    runtimes = store.get_task_runtimes("j")
    assert all(rt.revision == 11 and rt.failure_count == 10 for rt in runtimes.values())
    assert committer.batches < 200, committer.batches  # greenlets shared transactions
    print("OK", committer.batches)
""")


def test_greenlets_share_batches() -> None:
    result = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith("OK")
