"""Components that start and stop, and a group that starts them in order and stops them in reverse.

Every long-running piece of a daemon (goal-state engines, reconcilers, RPC
servers, the metrics endpoint) is a `Component`.  A daemon's composition
root lists them once, in dependency order, recovery first: a `Lifecycle`
starts them in that order when the daemon gains leadership and stops them
in reverse when it loses it, so nothing runs against state that is not
loaded yet and nothing outlives what it depends on.

If a start fails, the components already started are stopped (in reverse)
before the error propagates, so a failed `start()` leaves nothing running.
`stop()` always tries every started component, logs each failure, and
raises the first one at the end.  A `Lifecycle` is itself a `Component`,
so groups nest.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@runtime_checkable
class Component(Protocol):
    """Something with a start and a stop, owned by one composition root.

    `start()` returns once the component is running (it spawns its own
    greenlets) and raises if it cannot start.  `stop()` returns once its
    greenlets have exited; it is called only after a successful `start()`.
    """

    def start(self) -> None:
        """Begin work; raise if the component cannot run."""
        ...

    def stop(self) -> None:
        """End work and release resources."""
        ...


@dataclass(frozen=True, slots=True)
class FunctionComponent:
    """A component made of two callables, for wiring closures without a class."""

    name: str
    on_start: Callable[[], None]
    on_stop: Callable[[], None] = lambda: None

    def start(self) -> None:
        """Call `on_start`."""
        self.on_start()

    def stop(self) -> None:
        """Call `on_stop`."""
        self.on_stop()


def component_name(component: Component) -> str:
    """A readable name for logs: a `name` attribute if there is one, else the class name."""
    name = getattr(component, "name", None)
    return name if isinstance(name, str) else type(component).__name__


class Lifecycle:
    """Starts components in the given order and stops them in reverse; see the module docstring."""

    def __init__(self, components: Iterable[Component], *, name: str = "lifecycle",
                 log: logging.Logger | None = None) -> None:
        self.name = name
        self._components = list(components)
        self._started: list[Component] = []
        self._log = log or logging.getLogger("peloton.lifecycle")

    @property
    def running(self) -> bool:
        """True while any component is started."""
        return bool(self._started)

    @property
    def started(self) -> list[str]:
        """Names of the started components, in start order."""
        return [component_name(c) for c in self._started]

    def start(self) -> None:
        """Start every component in order; on a failure stop the started ones and re-raise."""
        if self._started:
            return
        for component in self._components:
            name = component_name(component)
            try:
                component.start()
            except BaseException:
                self._log.error("%s: %s failed to start; stopping %d started component(s)",
                                self.name, name, len(self._started))
                try:
                    self._stop_started()
                except Exception:
                    self._log.exception("%s: rollback after failed start of %s failed", self.name, name)
                raise
            self._started.append(component)
            self._log.info("%s: started %s", self.name, name)

    def stop(self) -> None:
        """Stop the started components in reverse order; raise the first failure after trying all."""
        self._stop_started()

    def _stop_started(self) -> None:
        first_error: BaseException | None = None
        while self._started:
            component = self._started.pop()
            name = component_name(component)
            try:
                component.stop()
                self._log.info("%s: stopped %s", self.name, name)
            except Exception as exc:
                self._log.exception("%s: %s failed to stop", self.name, name)
                first_error = first_error or exc
        if first_error is not None:
            raise first_error
