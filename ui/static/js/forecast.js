// The forecast panel of the job and task pages: on request (it runs the scheduler forward and
// takes seconds), when the tasks start, what binds them now and what would start them sooner,
// from GET /ui/api/jobs/<job>/forecast[?instance=n]. A failure (nothing pending any more, the
// server's cap on forecasts at once, no answer in time) is said in the panel, never left blank.

import {getJSON, seg} from './api.js';
import {facts, h} from './dom.js';

function span(secs, horizon) {
  if (secs === null || secs === undefined) return `not within ${span(horizon, horizon)}`;
  const s = Math.round(secs);
  if (s <= 0) return 'now';
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
  return `${Math.floor(s / 86400)}d${String(Math.floor((s % 86400) / 3600)).padStart(2, '0')}h`;
}

function range(est, horizon) {
  if (!est || !est.runs) return 'not run within the wall time';
  const a = span(est.p50_secs, horizon), b = span(est.p90_secs, horizon);
  return a === b ? a : `${a} (p50) to ${b} (p90)`;
}

function draw(f) {
  const horizon = f.bounds.horizon_secs;
  const which = f.instances.length === 1 ? `instance ${f.instances[0]}`
    : `the last of ${f.instances.length} pending instances (${f.instances.join(', ')})`;
  const b = f.binding;
  return [
    facts([['For', which], ['Starts', range(f.estimate, horizon)],
      ['Binding now', `${b.kind}: ${b.summary}`],
      ...(b.hosts_total ? [['Hosts', `${b.hosts_fit} of ${b.hosts_total} fit`]] : []),
      ['Bounds', `looked ${span(horizon, horizon)} ahead, ${f.wall_secs.toFixed(1)} s of ` +
        `${f.bounds.wall_secs} s wall time${f.truncated ? ' (cut short)' : ''}`]]),
    h('h3', {}, 'What would start it sooner'),
    f.counterfactuals.length
      ? h('ul', {class: 'reasons', 'data-forecast': 'changes'}, f.counterfactuals.map((c) =>
        h('li', {}, h('strong', {}, `${c.change}: `), range(c.estimate, horizon))))
      : h('p', {class: 'muted', 'data-forecast': 'changes'}, 'No change to try was found.'),
    f.notes.length ? h('p', {class: 'muted'}, f.notes.join('; ')) : null,
  ];
}

function failed(err) {
  // ApiError carries the server's kind; anything else is this script's own failure.
  const kind = err.kind ? ` (${err.kind})` : '';
  return h('p', {class: 'muted', 'data-forecast': 'error', role: 'alert'},
    `No forecast: ${err.message}${kind}`);
}

/** A panel with a button that asks for the forecast of `job` (one `instance`, or every pending one). */
export function forecastPanel(job, instance) {
  const hint = () => h('p', {class: 'muted'}, 'Runs the scheduler forward from the cluster as it ' +
    'is now; the answer takes a few seconds.');
  const out = h('div', {'data-forecast': 'result', 'aria-live': 'polite'}, hint());
  const path = `/ui/api/jobs/${seg(job)}/forecast` + (instance === undefined ? '' : `?instance=${instance}`);
  const button = h('button', {type: 'button', class: 'button', 'data-forecast': 'ask', onclick: async () => {
    button.disabled = true;
    out.dataset.state = 'running';
    out.replaceChildren(h('p', {class: 'muted'}, 'Running the scheduler forward…'));
    try {
      out.replaceChildren(...draw(await getJSON(path)).filter(Boolean));
      out.dataset.state = 'done';
    } catch (err) {
      out.replaceChildren(failed(err));
      out.dataset.state = 'failed';
    } finally {
      button.disabled = false;
    }
  }}, 'Forecast start');
  return h('section', {class: 'panel', 'aria-label': 'forecast'},
    h('div', {class: 'row'}, h('h2', {}, 'When will it start?'), h('div', {class: 'actions'}, button)), out);
}
