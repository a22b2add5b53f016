"""A pytest plugin that lets several pytest processes share one run of the suite.

`make test` starts the suite as two pytest processes (scripts/pytest_shards.py) because most
of its time is spent waiting on real servers and daemons, not computing, and one process
leaves the machine half idle.  The split is decided while the run goes, one test module at a
time: a process claims a module by creating its claim file (O_EXCL in a directory the
processes share) just before running the module's first test; a module another process
claimed is passed over without a report.  Shard 0 takes the modules in collection order and
the others in the reverse order, so they meet wherever the time runs out and each keeps its
module's (and mostly its directory's) fixtures to itself.

Each process writes what it collected and what it ran, so the runner can prove that every
collected test ran exactly once (the union of the ran lists equals the collected list, no
test in two of them): a test passed over by every process would otherwise vanish silently.

Off unless `--shard-claims DIR` is given; a plain `pytest` run is untouched.
"""

from __future__ import annotations

import errno
import hashlib
import os
from pathlib import Path

import pytest

CLAIMS = pytest.StashKey[Path]()
RAN = pytest.StashKey[list[str]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    """`--shard-claims DIR` and `--shard-index I` (0 takes modules first to last)."""
    group = parser.getgroup("shard claims")
    group.addoption("--shard-claims", default=None, metavar="DIR",
                    help="share the run with other pytest processes claiming modules in DIR")
    group.addoption("--shard-index", type=int, default=0, metavar="I",
                    help="this process's index among them (0 runs modules first to last)")


def module_of(item: pytest.Item) -> str:
    """The node id of the test module an item belongs to: the unit of a claim."""
    return item.nodeid.split("::", 1)[0]


def pytest_configure(config: pytest.Config) -> None:
    """Remember the claims directory when sharing is on."""
    claims = config.getoption("--shard-claims")
    if claims:
        config.stash[CLAIMS] = Path(claims)
        config.stash[RAN] = []


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Shards after the first walk the modules from the last: whole modules reversed, the
    tests inside each module kept in their order (their module fixtures expect it)."""
    if CLAIMS not in config.stash:
        return
    (config.stash[CLAIMS] / f"collected-{config.getoption('--shard-index')}.txt").write_text(
        "".join(f"{item.nodeid}\n" for item in items))
    if config.getoption("--shard-index") == 0:
        return
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(module_of(item), []).append(item)
    items[:] = [item for module in reversed(modules) for item in modules[module]]


def claim(claims: Path, module: str) -> bool:
    """Claim a module for this process: True when it is ours (just claimed or claimed by us
    before), False when another process has it."""
    name = hashlib.sha256(module.encode()).hexdigest()[:32]
    path = claims / "claims" / name
    path.parent.mkdir(exist_ok=True)
    mine = f"{os.getpid()} {module}\n"
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except OSError as error:
        if error.errno != errno.EEXIST:
            raise
        return path.read_text() == mine
    with os.fdopen(fd, "w") as out:
        out.write(mine)
    return True


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
    """Run the item when its module is ours; otherwise pass over it without a report, after
    tearing down whatever the next item does not share (as the default protocol would)."""
    config = item.config
    if CLAIMS not in config.stash:
        return None
    if claim(config.stash[CLAIMS], module_of(item)):
        config.stash[RAN].append(item.nodeid)
        return None
    # The default protocol tears down after each item what `nextitem` does not need; an item
    # passed over must do the same, or the next item we run finds fixtures of a module it is
    # not in still set up (pytest's SetupState refuses that).
    item.session._setupstate.teardown_exact(nextitem)
    return True


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Write the node ids this process ran, for the runner's every-test-once check."""
    config = session.config
    if CLAIMS in config.stash:
        (config.stash[CLAIMS] / f"ran-{config.getoption('--shard-index')}.txt").write_text(
            "".join(f"{nodeid}\n" for nodeid in config.stash[RAN]))
