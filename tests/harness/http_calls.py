"""Plain HTTP calls for tests of the web fronts: the status, headers and body of any answer,
error statuses included, and an opener that does not follow redirects (so a test sees them)."""

from __future__ import annotations

import urllib.error
import urllib.request
from typing import Any


def http_call(url: str, method: str = "GET", body: bytes | None = None,
              headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    """(status, headers, body) of one request; 4xx and 5xx are answers, not exceptions."""
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read()


class NoRedirect(urllib.request.HTTPRedirectHandler):
    """With urllib.request.build_opener: a redirect is returned as the answer."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None
