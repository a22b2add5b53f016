"""How a long-running process (`peloton up`, a daemon, an agent) is told to stop, and ends.

* The first SIGINT or SIGTERM asks for a clean stop (`stop_on_signals` sets an event
  that the process's main loop waits on) and gives both signals their default action
  back at once: a second Ctrl-C, or a supervisor's SIGTERM while the clean stop is under
  way, ends the process there and then.  Before, the handler stayed installed for good:
  a process whose stop was slow (a long List in flight) or that hung after printing
  "stopped" ignored every later SIGTERM, and only SIGKILL ended it.
* Once the process has stopped its components and said so, `exit_now` ends it without
  Python's interpreter shutdown, which joins every non-daemon thread (under gevent,
  every greenlet of one) and finalises gRPC's core: a call handler still running after
  its server stopped (a reply to a client that went away) held the process there.
  Output and log handlers are flushed first; nothing else is left to do by then.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from types import FrameType

#: The signals that ask a process to stop.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def stop_on_signals(stop: threading.Event) -> None:
    """Make the first SIGINT/SIGTERM set `stop` and restore both signals' default action
    (call from the main thread, as `signal.signal` requires)."""
    def handler(signum: int, frame: FrameType | None) -> None:
        for sig in STOP_SIGNALS:
            signal.signal(sig, signal.SIG_DFL)
        stop.set()

    for sig in STOP_SIGNALS:
        signal.signal(sig, handler)


def exit_now(code: int) -> None:
    """Flush output and logs, then end the process with `code` at once (see above)."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass  # closed or gone (a reader that went away): nothing more to say
    os._exit(code)
