"""Our update options (proto/pelotonpy/api/update) <-> the core UpdateSpec's extension fields.

The options ride beside Peloton's own request as the gRPC metadata entry
`pelotonpy-update-options-bin` (a serialized UpdateOptions), so Peloton's
messages stay as they are on the wire.  `from_metadata` finds and checks them
(bad options are InvalidArgument naming the field); `apply` puts them on a core
UpdateSpec; `to_pb` reads a spec's options back.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from google.protobuf.message import DecodeError

from peloton.api.gen.pelotonpy.api.update import update_pb2
from peloton.core.errors import InvalidArgument
from peloton.core.model.update import Strategy, UpdateSpec

#: The request metadata key that carries a serialized UpdateOptions.
METADATA_KEY = "pelotonpy-update-options-bin"

_FROM_PB = {update_pb2.STRATEGY_QUEUE: Strategy.QUEUE, update_pb2.STRATEGY_BATCH: Strategy.BATCH,
            update_pb2.STRATEGY_VAR_BATCH: Strategy.VAR_BATCH}
_TO_PB = {v: k for k, v in _FROM_PB.items()}


def check(options: update_pb2.UpdateOptions) -> None:
    """Refuse options the core cannot run, naming the field."""
    if options.strategy not in _FROM_PB:
        raise InvalidArgument(f"strategy: unknown strategy {options.strategy}", field="strategy")
    if options.watch_time_ms < 0:
        raise InvalidArgument(f"watch_time_ms must not be negative, got {options.watch_time_ms}",
                              field="watch_time_ms")
    var = options.strategy == update_pb2.STRATEGY_VAR_BATCH
    if var and not options.group_sizes:
        raise InvalidArgument("group_sizes: a VAR_BATCH update needs at least one group size",
                              field="group_sizes")
    if not var and options.group_sizes:
        raise InvalidArgument("group_sizes: only a VAR_BATCH update has group sizes",
                              field="group_sizes")
    for i, size in enumerate(options.group_sizes):
        if size <= 0:
            raise InvalidArgument(f"group_sizes[{i}] must be above 0, got {size}",
                                  field=f"group_sizes[{i}]")
    if options.autopause_after_batch and options.strategy == update_pb2.STRATEGY_QUEUE:
        raise InvalidArgument("autopause_after_batch: only BATCH and VAR_BATCH updates have "
                              "batches to pause after", field="autopause_after_batch")


def from_metadata(metadata: Iterable[Any] | None) -> update_pb2.UpdateOptions | None:
    """The checked UpdateOptions of a call's metadata, or None when it has none."""
    for key, value in metadata or ():
        if key != METADATA_KEY:
            continue
        options = update_pb2.UpdateOptions()
        try:
            options.ParseFromString(value if isinstance(value, bytes) else value.encode())
        except DecodeError:
            raise InvalidArgument(f"{METADATA_KEY}: not a serialized UpdateOptions",
                                  field=METADATA_KEY) from None
        check(options)
        return options
    return None


def apply(spec: UpdateSpec, options: update_pb2.UpdateOptions | None) -> UpdateSpec:
    """`spec` with the options' strategy, group sizes, auto-pause and watch time."""
    if options is None:
        return spec
    check(options)
    return dataclasses.replace(spec, strategy=_FROM_PB[options.strategy],
                               group_sizes=tuple(int(s) for s in options.group_sizes),
                               autopause=options.autopause_after_batch,
                               watch_secs=options.watch_time_ms / 1000.0,
                               rollback_order=options.rollback)


def to_pb(spec: UpdateSpec) -> update_pb2.UpdateOptions:
    """The options a core UpdateSpec runs with."""
    return update_pb2.UpdateOptions(strategy=_TO_PB[spec.strategy],
                                    group_sizes=list(spec.group_sizes),
                                    autopause_after_batch=spec.autopause,
                                    watch_time_ms=round(spec.watch_secs * 1000),
                                    rollback=spec.rollback_order)


def to_metadata(options: update_pb2.UpdateOptions) -> tuple[str, bytes]:
    """The metadata entry carrying `options` (for clients)."""
    return METADATA_KEY, options.SerializeToString()
