"""Files of the remote-volume cache on disk: read-only trees, ownership, sizes, removal.

The cache (remote_volumes.py) keeps its entries as the agent's and read-only, so a task,
another uid, cannot change what later runs see; these walk such trees without following
links.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from pathlib import Path


def make_parents(sandbox: Path, dest: Path) -> None:
    """The directories between a sandbox and a path in it, the agent's and 0755 (not cut by
    the agent's umask), so the task can walk to what is placed there but not replace it."""
    missing = []
    parent = dest.parent
    while parent != sandbox and not parent.is_dir():
        missing.append(parent)
        parent = parent.parent
    for path in reversed(missing):
        path.mkdir(exist_ok=True)
        os.chmod(path, 0o755)


def read_only(top: Path) -> None:
    """An unpacked tree as the cache keeps it: the agent's, nobody may write (but the top,
    which the caller closes once it is in place)."""
    me, group = os.geteuid(), os.getegid()
    for base, dirs, files in os.walk(top):
        for name in files:
            path = os.path.join(base, name)
            st = os.lstat(path)
            os.lchown(path, me, group)
            if not stat.S_ISLNK(st.st_mode):
                os.chmod(path, 0o555 if st.st_mode & 0o111 else 0o444)
        for name in dirs:
            os.lchown(os.path.join(base, name), me, group)
    for base, dirs, _files in os.walk(top, topdown=False):
        for name in dirs:
            os.chmod(os.path.join(base, name), 0o555)


def chown_tree(top: Path, uid: int, gid: int) -> None:
    """Give a tree (a private copy moved into a run's sandbox) to the run's user."""
    os.lchown(top, uid, gid)
    for base, dirs, files in os.walk(top):  # never follows links
        for name in (*dirs, *files):
            os.lchown(os.path.join(base, name), uid, gid)


def tree_size(path: Path) -> int:
    """An entry's bytes: a file's length, or the sum of the files of an unpacked tree."""
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        return st.st_size
    total = 0
    for base, _dirs, files in os.walk(path):
        for name in files:
            total += os.lstat(os.path.join(base, name)).st_size
    return total


def remove_all(victims: list[Path]) -> None:
    """`remove_path` each of `victims` (evicted entries)."""
    for path in victims:
        remove_path(path)


def remove_path(path: Path) -> None:
    """Remove a file or a read-only tree (its directories opened first); gone is fine."""
    with contextlib.suppress(FileNotFoundError):  # gone already: what was wanted
        if path.is_dir() and not path.is_symlink():
            for base, dirs, _files in os.walk(path):  # unpacked trees are read-only
                for name in dirs:
                    os.chmod(os.path.join(base, name), 0o700)
            shutil.rmtree(path)
        else:
            path.unlink()
