"""The forecast half of the typed client: pelotonpy.api.forecast.ForecastService on the
resource manager (our extension: when a pending task will start, what would start it sooner;
proto/pelotonpy/api/forecast).  Failures come as peloton.core.errors (NotFound: nothing
pending; InvalidArgument naming the field; Unavailable: no answer within the wall cap)."""

from __future__ import annotations

from collections.abc import Sequence

from peloton.api.client_transport import ServiceHandle
from peloton.api.convert.ext_forecast import forecast_from_pb
from peloton.api.gen.pelotonpy.api.forecast import forecast_pb2 as pb
from peloton.core.forecast.model import Forecast

#: Seconds the call may take beyond the forecast's own wall cap (the worker's start).
CALL_GRACE = 15.0


class ForecastCalls:
    """Methods of ForecastService."""

    _forecast: ServiceHandle

    def forecast(self, job_id: str, instances: Sequence[int] = (), *, horizon_secs: float = 0.0,
                 wall_secs: float = 0.0, variations: int = 0,
                 duration_secs: float = 0.0) -> Forecast:
        """When the job's pending instances (or those named) start, what binds them now and
        what would start them sooner; zeros take the server's defaults."""
        req = pb.ForecastRequest(job_id=job_id, instances=list(instances),
                                 horizon_secs=horizon_secs, wall_secs=wall_secs,
                                 variations=variations, duration_secs=duration_secs)
        timeout = (wall_secs or 10.0) + CALL_GRACE
        return forecast_from_pb(self._forecast.call("Forecast", req, pb.ForecastResponse,
                                                    timeout=timeout))
