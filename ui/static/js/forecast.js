// The forecast panel of the job and task pages: on request (it runs the scheduler forward and
// takes seconds), when the tasks start, what binds them now and what would start them sooner,
// from GET /ui/api/jobs/<job>/forecast[?instance=n].

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
  return [
    facts([['Starts', range(f.estimate, horizon)],
      ['Binding now', `${f.binding.kind}: ${f.binding.summary}`],
      ['Hosts', f.binding.hosts_total ? `${f.binding.hosts_fit} of ${f.binding.hosts_total} fit` : ''],
      ['Bounds', `looked ${span(horizon, horizon)} ahead, ${f.wall_secs.toFixed(1)} s of ` +
        `${f.bounds.wall_secs} s wall time${f.truncated ? ' (cut short)' : ''}`]]),
    h('h3', {}, 'What would start it sooner'),
    h('ul', {class: 'reasons', 'data-forecast': 'changes'}, f.counterfactuals.map((c) =>
      h('li', {}, h('strong', {}, `${c.change}: `), range(c.estimate, horizon)))),
    f.notes.length ? h('p', {class: 'muted'}, f.notes.join('; ')) : null,
  ];
}

/** A panel with a button that asks for the forecast of `job` (one `instance`, or every pending one). */
export function forecastPanel(job, instance) {
  const out = h('div', {'data-forecast': 'result', 'aria-live': 'polite'});
  const path = `/ui/api/jobs/${seg(job)}/forecast` + (instance === undefined ? '' : `?instance=${instance}`);
  const button = h('button', {type: 'button', onclick: async () => {
    button.disabled = true;
    out.replaceChildren(h('p', {class: 'muted'}, 'Running the scheduler forward…'));
    try {
      out.replaceChildren(...draw(await getJSON(path)).filter(Boolean));
    } catch (err) {
      out.replaceChildren(h('p', {class: 'muted'}, `${err.message} (${err.kind})`));
    } finally {
      button.disabled = false;
    }
  }}, 'Forecast start');
  return h('section', {class: 'panel', 'aria-label': 'forecast'},
    h('h2', {}, 'When will it start?', h('div', {class: 'actions'}, button)), out);
}
