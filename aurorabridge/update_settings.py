"""The JobUpdateSettings an Aurora update runs with: Aurora's defaults, stored and read back.

Aurora stores an update's settings as sent, after one backfill
(ThriftBackfill.backfillUpdateStrategy): a request without `updateStrategy`
gets `batchStrategy(updateGroupSize)` when `waitForBatchCompletion` is set,
else `queueStrategy(updateGroupSize)`; so getJobUpdateDetails always returns
a strategy (clients such as gorealis's AutoPausedUpdateMonitor dereference
it).  `effective` applies that backfill.

Peloton's UpdateSpec has no room for most of these settings (watch time,
strategy, group sizes, auto-pause), so the bridge keeps the effective
settings in the update's opaque data under `aurora_settings` (our extension
of Peloton's bridge's JSON; Peloton's bridge ignores the key), as a JSON
object of the Thrift field names (`to_doc`), and reads them back from there
(`from_doc`).  What the job manager executes of them is said in the README.
"""

from __future__ import annotations

from typing import Any

from aurorabridge.thrift_api import api

_INTS = ("updateGroupSize", "maxPerInstanceFailures", "maxFailedInstances", "minWaitInInstanceRunningMs")
_BOOLS = ("rollbackOnFailure", "waitForBatchCompletion")


def effective(settings: Any) -> Any:
    """A copy of `settings` with Aurora's default strategy when none was sent."""
    out = api.JobUpdateSettings(**{name: getattr(settings, name) for name in (
        *_INTS, *_BOOLS, "updateOnlyTheseInstances", "blockIfNoPulsesAfterMs", "slaAware",
        "updateStrategy")})
    if out.updateStrategy is None or not any((out.updateStrategy.queueStrategy,
                                              out.updateStrategy.batchStrategy,
                                              out.updateStrategy.varBatchStrategy)):
        size = settings.updateGroupSize or 0
        if settings.waitForBatchCompletion:
            out.updateStrategy = api.JobUpdateStrategy(
                batchStrategy=api.BatchJobUpdateStrategy(groupSize=size, autopauseAfterBatch=False))
        else:
            out.updateStrategy = api.JobUpdateStrategy(
                queueStrategy=api.QueueJobUpdateStrategy(groupSize=size))
    return out


def _strategy_doc(strategy: Any) -> dict[str, Any]:
    if strategy.varBatchStrategy is not None:
        s = strategy.varBatchStrategy
        return {"varBatchStrategy": {"groupSizes": [int(g) for g in s.groupSizes or ()],
                                     "autopauseAfterBatch": bool(s.autopauseAfterBatch)}}
    if strategy.batchStrategy is not None:
        b = strategy.batchStrategy
        return {"batchStrategy": {"groupSize": int(b.groupSize or 0),
                                  "autopauseAfterBatch": bool(b.autopauseAfterBatch)}}
    return {"queueStrategy": {"groupSize": int(strategy.queueStrategy.groupSize or 0)}}


def to_doc(settings: Any) -> dict[str, Any]:
    """The effective settings as a JSON-ready dict (Thrift field names)."""
    full = effective(settings)
    doc: dict[str, Any] = {name: int(getattr(full, name) or 0) for name in _INTS}
    doc.update({name: bool(getattr(full, name)) for name in _BOOLS})
    doc["updateOnlyTheseInstances"] = sorted([int(r.first), int(r.last)]
                                             for r in full.updateOnlyTheseInstances or ())
    if full.blockIfNoPulsesAfterMs is not None:
        doc["blockIfNoPulsesAfterMs"] = int(full.blockIfNoPulsesAfterMs)
    if full.slaAware is not None:
        doc["slaAware"] = bool(full.slaAware)
    doc["updateStrategy"] = _strategy_doc(full.updateStrategy)
    return doc


def _strategy(doc: Any) -> Any:
    if isinstance(doc, dict) and isinstance(doc.get("varBatchStrategy"), dict):
        s = doc["varBatchStrategy"]
        return api.JobUpdateStrategy(varBatchStrategy=api.VariableBatchJobUpdateStrategy(
            groupSizes=[int(g) for g in s.get("groupSizes") or ()],
            autopauseAfterBatch=bool(s.get("autopauseAfterBatch"))))
    if isinstance(doc, dict) and isinstance(doc.get("batchStrategy"), dict):
        b = doc["batchStrategy"]
        return api.JobUpdateStrategy(batchStrategy=api.BatchJobUpdateStrategy(
            groupSize=int(b.get("groupSize") or 0), autopauseAfterBatch=bool(b.get("autopauseAfterBatch"))))
    if isinstance(doc, dict) and isinstance(doc.get("queueStrategy"), dict):
        return api.JobUpdateStrategy(queueStrategy=api.QueueJobUpdateStrategy(
            groupSize=int(doc["queueStrategy"].get("groupSize") or 0)))
    return None


def from_doc(doc: dict[str, Any]) -> Any:
    """JobUpdateSettings from a stored dict (missing fields: Aurora's zero values)."""
    settings = api.JobUpdateSettings(
        **{name: int(doc.get(name) or 0) for name in _INTS},
        **{name: bool(doc.get(name)) for name in _BOOLS},
        updateOnlyTheseInstances=[api.Range(first=int(r[0]), last=int(r[1]))
                                  for r in doc.get("updateOnlyTheseInstances") or ()
                                  if isinstance(r, list) and len(r) == 2],
        blockIfNoPulsesAfterMs=doc.get("blockIfNoPulsesAfterMs"), slaAware=doc.get("slaAware"),
        updateStrategy=_strategy(doc.get("updateStrategy")))
    return effective(settings)
