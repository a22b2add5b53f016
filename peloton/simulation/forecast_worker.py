"""`python -m peloton.simulation.forecast_worker`: one forecast in a child process.

Reads a pickled (snapshot, job id, instances, bounds) on stdin, writes the pickled
`Forecast` on stdout, or (error kind, message, field) for a refusal.  Only its parent
(peloton/cluster/forecast.py, the same code) talks to it.
"""

from __future__ import annotations

import pickle
import sys

from peloton.core.errors import PelotonError
from peloton.simulation.forecast_run import forecast


def main() -> int:
    """Run one forecast from stdin to stdout."""
    snapshot, job_id, instances, bounds = pickle.loads(sys.stdin.buffer.read())
    try:
        result: object = forecast(snapshot, job_id, instances, bounds=bounds)
    except PelotonError as exc:
        result = (exc.kind, exc.message, exc.field)
    sys.stdout.buffer.write(pickle.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
