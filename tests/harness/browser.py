"""Real headless Chromium for UI tests: render a page and read the DOM it built.

`render(url)` runs Debian's `chromium --headless --dump-dom` in a fresh
profile with the flags that work on these machines (no sandbox as root, no
GPU, no background networking, whose connections the closed network
refuses).  `--virtual-time-budget` lets the page's scripts and timers run
for that much virtual time; it does not pass while a fetch is in flight,
so what comes back is the page after its data arrived.  The browser runs
in its own session and is killed by process group if it overstays.

`Dom` parses the dump into a small `Element` tree with just the queries
the tests need (by tag and attribute, text content, table rows), and
`Browser` drives a live tab over the DevTools protocol for clicks.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--hide-scrollbars"]
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class PageScriptError(AssertionError):
    """A script run in the tab threw."""


def chromium() -> str | None:
    """The Chromium binary, if installed."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _run(args: list[str], timeout: float) -> str:
    binary = chromium()
    if binary is None:
        raise FileNotFoundError("chromium is not installed (scripts/ensure_system_packages.sh installs it)")
    with tempfile.TemporaryDirectory(prefix="peloton-chromium-") as profile:
        proc = subprocess.Popen([binary, *FLAGS, f"--user-data-dir={profile}", *args],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise AssertionError(f"chromium did not finish within {timeout}s: {args}") from None
    if proc.returncode != 0:
        raise AssertionError(f"chromium exited {proc.returncode}: {err[-2000:]}")
    return out


def render(url: str, *, budget_ms: int = 5000, timeout: float = 60) -> Element:
    """The DOM of `url` (its document node) after its scripts ran for `budget_ms` of virtual time."""
    return Dom.parse(_run([f"--virtual-time-budget={budget_ms}", "--dump-dom", url], timeout))


def screenshot(url: str, path: str, *, size: str = "1280,900", budget_ms: int = 5000) -> None:
    """A PNG of `url` as a 1280-wide window shows it."""
    _run([f"--window-size={size}", f"--virtual-time-budget={budget_ms}", f"--screenshot={path}", url], 60)


@dataclass
class Element:
    """One element of the parsed DOM."""

    tag: str
    attrs: dict[str, str]
    children: list[Element | str] = field(default_factory=list)

    @property
    def text(self) -> str:
        """All text inside, concatenated."""
        return "".join(c if isinstance(c, str) else c.text for c in self.children)

    def walk(self) -> Iterator[Element]:
        """This element and every element inside it, in document order."""
        yield self
        for child in self.children:
            if isinstance(child, Element):
                yield from child.walk()

    def find_all(self, tag: str = "", **attrs: str) -> list[Element]:
        """Elements with this tag (any if empty) and these attribute values (`data_x` = `data-x`)."""
        wanted = {k.replace("_", "-"): v for k, v in attrs.items()}
        return [e for e in self.walk() if (not tag or e.tag == tag)
                and all(e.attrs.get(k) == v for k, v in wanted.items())]

    def find(self, tag: str = "", **attrs: str) -> Element:
        """The first match; AssertionError naming the query if none."""
        found = self.find_all(tag, **attrs)
        assert found, f"no <{tag or '*'}> with {attrs}"
        return found[0]

    def rows(self, where: Callable[[Element], bool] = lambda e: True) -> list[list[str]]:
        """The body rows of every table inside (that `where` accepts), as lists of cell texts."""
        out = []
        for table in self.find_all("table"):
            if where(table):
                for body in table.find_all("tbody"):
                    out += [[td.text.strip() for td in tr.find_all("td")] for tr in body.find_all("tr")]
        return out


class Dom(HTMLParser):
    """Builds an `Element` tree from serialized HTML (as Chromium dumps it: well formed)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("#document", {})
        self._stack = [self.root]

    @classmethod
    def parse(cls, html: str) -> Element:
        """The document node of `html`."""
        dom = cls()
        dom.feed(html)
        dom.close()
        return dom.root

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        el = Element(tag, {k: v or "" for k, v in attrs})
        self._stack[-1].children.append(el)
        if tag not in VOID:
            self._stack.append(el)

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self._stack) - 1, 0, -1):
            if self._stack[i].tag == tag:
                del self._stack[i:]
                return

    def handle_data(self, data: str) -> None:
        self._stack[-1].children.append(data)


class Browser:
    """Chromium driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`).

    Messages are NUL-terminated JSON, written to the browser's fd 3 and read
    from its fd 4: no websocket library needed.  Pages are real tabs, so
    clicks run the page's own handlers (dialogs, fetches) as a user's would.
    """

    def __init__(self, timeout: float = 30) -> None:
        binary = chromium()
        if binary is None:
            raise FileNotFoundError("chromium is not installed")
        self.timeout = timeout
        self._profile = tempfile.TemporaryDirectory(prefix="peloton-chromium-")
        to_browser, self._to_browser = os.pipe()
        self._from_browser, from_browser = os.pipe()

        def wire_fds() -> None:
            # In the child: the protocol's fixed descriptors 3 and 4 (via fresh copies, so one
            # dup2 cannot clobber the other's source; kept open because 3 and 4 are in pass_fds).
            reading, writing = os.dup(to_browser), os.dup(from_browser)
            os.dup2(reading, 3)
            os.dup2(writing, 4)

        self.proc = subprocess.Popen(
            [binary, *FLAGS, f"--user-data-dir={self._profile.name}", "--remote-debugging-pipe",
             "--window-size=1280,900", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=wire_fds,
            pass_fds=(3, 4), start_new_session=True)
        os.close(to_browser)
        os.close(from_browser)
        self._buffer = b""
        self._next_id = 0

    def call(self, method: str, params: dict[str, Any] | None = None, session: str = "") -> dict[str, Any]:
        """Send one command and return its result (events in between are dropped)."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise AssertionError(f"{method}: {reply['error']}")
                return dict(reply.get("result", {}))

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self._from_browser], [], [], max(0.0, left))
            if not ready:
                raise AssertionError(f"chromium did not answer within {self.timeout}s")
            chunk = os.read(self._from_browser, 1 << 16)
            if not chunk:
                raise AssertionError("chromium closed the DevTools pipe")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return dict(json.loads(raw))

    def open(self, url: str) -> str:
        """A new tab at `url`; returns its session id for `evaluate`."""
        target = self.call("Target.createTarget", {"url": url})["targetId"]
        return str(self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"])

    def evaluate(self, session: str, expression: str) -> Any:
        """Run JavaScript in the tab (awaiting a promise) and return its JSON value."""
        result = self.call("Runtime.evaluate", {"expression": expression, "awaitPromise": True,
                                                "returnByValue": True}, session)
        if "exceptionDetails" in result:
            raise PageScriptError(f"page script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, session: str, predicate: str, timeout: float) -> Any:
        """Poll a JavaScript expression in the tab until it is truthy; returns its value.

        A predicate that throws counts as not yet: the page's own refresh replaces the
        elements it reads (querySelector is null for a moment).  The last error is
        reported if the deadline passes."""
        deadline = time.monotonic() + timeout
        error = ""
        while True:
            try:
                value = self.evaluate(session, predicate)
            except PageScriptError as exc:
                value, error = None, f" (last: {exc})"
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout}s waiting for {predicate}{error}")
            time.sleep(0.2)

    def hold_requests(self, session: str, url_pattern: str) -> None:
        """Hold every request of the tab whose URL matches `url_pattern` (`*` wildcards) with
        no answer, as a server that never replies would: the page's own timeout must act."""
        self.call("Fetch.enable", {"patterns": [{"urlPattern": url_pattern}]}, session)

    def close(self) -> None:
        """End the browser (by process group) and remove its profile."""
        try:
            self.call("Browser.close")
        except (AssertionError, OSError):
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)
        for fd in (self._to_browser, self._from_browser):
            try:
                os.close(fd)
            except OSError:
                pass
        self._profile.cleanup()
