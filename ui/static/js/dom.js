// Small DOM helpers shared by every page. Text goes in through textContent only, never innerHTML,
// so names and log lines from the cluster can never inject markup.

/** Build an element: h('a', {href: '/x', class: 'y'}, 'text', child, [more]). */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith('on')) el.addEventListener(key.slice(2), value);
    else if (key === 'class') el.className = value;
    else if (key === 'style') el.style.cssText = value;  // CSSOM: allowed by the page's CSP, unlike style=""
    else el.setAttribute(key, value === true ? '' : String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

// Every state name Peloton uses (jobs, tasks, hosts, workflows) and its tone (colour family).
const TONES = {
  ok: ['SUCCEEDED', 'UP'],
  run: ['RUNNING', 'STARTING', 'LAUNCHED', 'LAUNCHING', 'ROLLING_FORWARD'],
  wait: ['INITIALIZED', 'PENDING', 'READY', 'PLACING', 'PLACED', 'RESERVED', 'UNINITIALIZED', 'PAUSED'],
  warn: ['KILLING', 'PREEMPTING', 'DRAINING', 'DRAINED', 'ROLLING_BACKWARD'],
  bad: ['FAILED', 'LOST', 'ROLLED_BACK'],
  off: ['KILLED', 'DELETED', 'ABORTED', 'DOWN', 'UNKNOWN', 'INVALID'],
};
const TONE_OF = Object.fromEntries(Object.entries(TONES).flatMap(([t, names]) => names.map((n) => [n, t])));

export function tone(state) { return TONE_OF[state] || 'wait'; }

/** A colour-coded state badge; the text is the state, so colour is never the only signal. */
export function badge(state) {
  return h('span', {class: `state tone-${tone(state)}`, 'data-state': state}, state || '—');
}

/** Counts by state as badges "RUNNING 3", most urgent first. */
export function counts(byState, label) {
  const order = ['bad', 'warn', 'run', 'wait', 'ok', 'off'];
  const entries = Object.entries(byState || {}).filter(([, n]) => n > 0)
    .sort((a, b) => order.indexOf(tone(a[0])) - order.indexOf(tone(b[0])) || a[0].localeCompare(b[0]));
  if (!entries.length) return h('p', {class: 'muted'}, `No ${label}.`);
  return h('ul', {class: 'counts', 'aria-label': label},
    entries.map(([state, n]) => h('li', {}, h('span', {class: `state tone-${tone(state)}`, 'data-state': state},
      `${state} ${n}`))));
}

/** A bar of coloured segments, one per state, proportional to the counts. */
export function stackbar(byState) {
  const entries = Object.entries(byState || {}).filter(([, n]) => n > 0);
  const total = entries.reduce((sum, [, n]) => sum + n, 0);
  return h('div', {class: 'stackbar', 'aria-hidden': 'true'}, entries.map(([state, n]) =>
    h('span', {class: `tone-${tone(state)}`, style: `width:${(100 * n / total).toFixed(2)}%`, title: `${state} ${n}`})));
}

/** A table with a header; rows are arrays of cells (strings or nodes); `num` columns align right. */
export function table(columns, rows, empty = 'Nothing to show.', caption = '') {
  if (!rows.length) return h('p', {class: 'muted'}, empty);
  const cls = (col) => (col.num ? 'num' : col.cls || undefined);
  return h('table', {},
    caption ? h('caption', {}, caption) : null,
    h('thead', {}, h('tr', {}, columns.map((col) => h('th', {scope: 'col', class: cls(col)}, col.title)))),
    h('tbody', {}, rows.map((cells) => h('tr', {}, cells.map((cell, i) => h('td', {class: cls(columns[i])}, cell))))));
}

/** A definition list of [term, value] pairs; empty values show a dash. */
export function facts(pairs) {
  return h('dl', {class: 'facts'}, pairs.map(([term, value]) =>
    [h('dt', {}, term), h('dd', {}, value === '' || value === undefined || value === null ? '—' : value)]));
}

/** An RFC 3339 time in the viewer's zone, inside <time>; '' for unset. */
export function time(iso) {
  if (!iso) return '';
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return iso;
  const pad = (n) => String(n).padStart(2, '0');
  const text = `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())} ` +
    `${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}`;
  return h('time', {datetime: iso}, text);
}

/** How long from `start` to `end` (or now), as "1h 2m", "3m 4s", "5s". */
export function duration(start, end) {
  if (!start) return '';
  const ms = (end ? new Date(end) : new Date()) - new Date(start);
  if (!(ms >= 0)) return '';
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  return `${Math.floor(s / 3600)}h ${Math.floor(s / 60) % 60}m`;
}

/**
 * A live duration: from `start` to `end`, or counting up while `end` is unset. The page's clock
 * (`tickDurations`, every second) rewrites the text in place, so a running task's age stays true
 * without redrawing its table.
 */
export function since(start, end) {
  return h('span', {'data-since': start || null, 'data-until': end || null}, duration(start, end));
}

export function tickDurations() {
  for (const el of document.querySelectorAll('[data-since]:not([data-until])')) {
    el.textContent = duration(el.dataset.since, '');
  }
}

/** A resource amount in its kind's unit (memory and disk arrive in MB). */
export function amount(kind, value) {
  const v = Number(value) || 0;
  if (kind === 'memory' || kind === 'disk') {
    return v >= 1024 ? `${(v / 1024).toFixed(v >= 10240 ? 0 : 1)} GB` : `${Math.round(v)} MB`;
  }
  return `${Math.round(v * 100) / 100}`;
}

/** A small meter: `used` of `limit`, with a mark at `reserved`. */
export function meter(used, reserved, limit, label) {
  const top = Math.max(limit, reserved, used, 1e-9);
  const fill = Math.min(100, (100 * used) / top);
  return h('div', {class: 'meter', role: 'img', 'aria-label': label},
    h('div', {class: `fill${limit > 0 && used > limit ? ' over' : ''}`, style: `width:${fill.toFixed(1)}%`}),
    reserved > 0 ? h('div', {class: 'mark', style: `left:${Math.min(100, (100 * reserved) / top).toFixed(1)}%`}) : null);
}

/**
 * A region of the page that is redrawn only when its data changed, so a refresh does not throw away
 * the reader's text selection, scroll position or keyboard focus. Focus survives a redraw when the
 * focused element carries a data-key that the new content has too.
 */
export function region(el) {
  let last;
  return (data, render) => {
    const json = JSON.stringify(data);
    if (json === last) return;
    last = json;
    const key = document.activeElement && el.contains(document.activeElement)
      ? document.activeElement.getAttribute('data-key') : null;
    const out = render(data);
    el.replaceChildren(...(Array.isArray(out) ? out : [out]).flat(Infinity).filter((n) => n));
    if (key) {
      const again = el.querySelector(`[data-key="${CSS.escape(key)}"]`);
      if (again) again.focus();
    }
  };
}
