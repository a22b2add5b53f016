"""The report as JSON for scripts (`peloton simulate --json`), versioned and deterministic.

    {"format": "peloton-sim-report", "version": 1,
     "runs": [<RunReport>, ...],          # the baseline first, then the what-if
     "comparison": <Comparison> | null}

Objects have the fields of the dataclasses in report.py, in their order; resource
vectors are {"cpu", "mem_mb", "disk_mb", "gpu"}; a `Delta` also carries its
`delta`; times are seconds since t = 0; floats are rounded to 6 decimals so the
same numbers always print the same.  Nothing in it depends on the machine or the
wall clock.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from peloton.core.model.resources import Resources
from peloton.simulation.metrics import Amounts
from peloton.simulation.report import Comparison, Delta, RunReport

FORMAT = "peloton-sim-report"
VERSION = 1
#: Decimals kept of every float.
DECIMALS = 6


def to_data(value: Any) -> Any:
    """Plain JSON data of a report value (see the module docstring)."""
    if isinstance(value, Resources | Amounts):
        return {"cpu": _float(value.cpu), "mem_mb": _float(value.mem_mb),
                "disk_mb": _float(value.disk_mb), "gpu": _float(value.gpu)}
    if isinstance(value, Delta):
        return {"metric": value.metric, "unit": value.unit, "baseline": _float(value.baseline),
                "whatif": _float(value.whatif), "delta": _float(value.delta)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_data(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple | list):
        return [to_data(v) for v in value]
    if isinstance(value, bool | int | str) or value is None:
        return value
    if isinstance(value, float):
        return _float(value)
    raise TypeError(f"no JSON form for {type(value).__name__}")


def _float(value: float | None) -> float | None:
    if value is None:
        return None
    rounded = round(value, DECIMALS)
    return 0.0 if rounded == 0 else rounded  # no "-0.0"


def report_data(baseline: RunReport, whatif: RunReport | None = None,
                comparison: Comparison | None = None) -> dict[str, Any]:
    """The whole JSON document as data."""
    runs = [baseline] + ([whatif] if whatif else [])
    return {"format": FORMAT, "version": VERSION, "runs": [to_data(r) for r in runs],
            "comparison": to_data(comparison) if comparison else None}


def render_json(baseline: RunReport, whatif: RunReport | None = None,
                comparison: Comparison | None = None) -> str:
    """The JSON document as text (indented, ends with a newline)."""
    return json.dumps(report_data(baseline, whatif, comparison), indent=2, ensure_ascii=False,
                      allow_nan=False) + "\n"
