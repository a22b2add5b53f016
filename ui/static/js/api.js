// The JSON API client of the pages: every answer is an object; failures carry the server's
// {"error": kind, "message": text}, which the pages show as they are.

// How long a request may take: the server derives it from its forecast's wall time, the
// slowest answer it gives (ui/reads.py page_timeout_secs), and writes it into the page.
// Read per request, from the page as it is now.
function timeoutMs() {
  const given = Number(document.querySelector('meta[name="peloton-api-timeout-ms"]')?.content);
  return given > 0 ? given : 30000;
}
// Every POST carries the session's CSRF token, which the server put in the page (ui/gate.py).
const CSRF = document.querySelector('meta[name="peloton-csrf"]')?.content || '';

export class ApiError extends Error {
  constructor(kind, message, status) {
    super(message);
    this.kind = kind;
    this.status = status;
  }
}

async function request(path, options) {
  const abort = new AbortController();
  const timeout = timeoutMs();
  const timer = setTimeout(() => abort.abort(), timeout);
  let response;
  try {
    response = await fetch(path, {...options, signal: abort.signal, headers: {Accept: 'application/json', ...options.headers}});
  } catch (err) {
    const why = err.name === 'AbortError' ? `the UI server did not answer within ${timeout / 1000}s`
      : `cannot reach the UI server: ${err.message}`;
    throw new ApiError('unavailable', why, 0);
  } finally {
    clearTimeout(timer);
  }
  let body = null;
  try {
    body = await response.json();
  } catch {
    throw new ApiError('internal', `HTTP ${response.status}: the answer is not JSON`, response.status);
  }
  if (response.status === 401) {
    window.location.assign('/login');  // logged out (or the session expired)
  }
  if (!response.ok) {
    throw new ApiError(body.error || 'error', body.message || `HTTP ${response.status}`, response.status);
  }
  return body;
}

/** GET a JSON object. */
export function getJSON(path) {
  return request(path, {method: 'GET'});
}

/** POST a JSON object (the server refuses writes that are not JSON, see ui/http.py). */
export function postJSON(path, body = {}) {
  return request(path, {method: 'POST', headers: {'Content-Type': 'application/json', 'X-CSRF-Token': CSRF},
                        body: JSON.stringify(body)});
}

/** A path segment, escaped. */
export const seg = (text) => encodeURIComponent(String(text));
