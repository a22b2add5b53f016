// Task: one instance's current run, the tail of its stdout and stderr (kept scrolled to the end
// while the reader is there) and its pod events, newest first.

import {actionButton} from '../actions.js';
import {seg} from '../api.js';
import {forecastPanel} from '../forecast.js';
import {badge, facts, h, region, since, table, time} from '../dom.js';

function header(d) {
  const t = d.task;
  const path = `/ui/api/jobs/${seg(d.job_id)}/tasks/${t.instance}`;
  const name = `instance ${t.instance}`;
  return [
    h('p', {class: 'breadcrumbs'}, h('a', {href: '/jobs'}, 'Jobs'), ' › ',
      h('a', {href: `/jobs/${seg(d.job_id)}`, title: d.job_id}, d.job_name || d.job_id), ' › ', name),
    h('h1', {}, `Task ${t.name || name}`, badge(t.state),
      h('div', {class: 'actions'},
        actionButton('Restart', {path: `${path}/restart`, title: `Restart ${name}?`, confirm: 'Restart',
          text: 'The current run is killed and a new run is started.'}),
        actionButton('Start', {path: `${path}/start`, title: `Start ${name}?`, confirm: 'Start',
          text: 'A stopped instance is started again.'}),
        actionButton('Stop', {path: `${path}/stop`, title: `Stop ${name}?`, confirm: 'Stop task',
          text: `The current run of ${name} is killed and not restarted.`}, {danger: true}))),
  ];
}

const WAITING = ['INITIALIZED', 'PENDING', 'READY', 'PLACING', 'PLACED', 'LAUNCHING', 'LAUNCHED'];

function runtime(t) {
  const ports = Object.entries(t.ports).map(([n, p]) => `${n}=${p}`).join(', ');
  const waiting = WAITING.includes(t.state) && t.reason;
  return [waiting ? h('p', {class: 'why', 'data-why': 'true'}, h('strong', {}, 'Why it waits: '), t.reason) : null,
    h('h2', {}, 'Current run'), facts([
    ['State', badge(t.state)], ['Goal state', badge(t.goal_state)], ['Host', t.host], ['Ports', ports],
    ['Run', h('code', {}, t.run_id)], ['Started', time(t.started)], ['Completed', time(t.completed)],
    ['Ran for', since(t.started, t.completed)], ['Failures', String(t.failures)],
    ['Message', t.message], ['Reason', t.reason !== t.message ? t.reason : ''],
    ['Health', t.healthy === 'INVALID' ? '' : t.healthy]])];
}

function logPanel(name, log) {
  const body = log.error
    ? h('p', {class: 'muted', 'data-log-error': name}, `${log.message} (${log.error})`)
    : h('pre', {class: 'log', tabindex: 0, 'data-log': name, 'aria-label': `${name} of this run`},
      log.text || '(empty)');
  const note = log.truncated ? ` — last ${log.text.length.toLocaleString()} characters of ` +
    `${log.size.toLocaleString()} bytes` : '';
  return h('section', {class: 'panel', 'aria-label': name}, h('h2', {}, name, h('span', {class: 'muted'}, note)), body);
}

function drawLogs(el, logs) {
  // Stay at the bottom of a log the reader has scrolled to the end of (tail -f), else leave it be.
  const stuck = {};
  for (const pre of el.querySelectorAll('pre[data-log]')) {
    stuck[pre.dataset.log] = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
  }
  el.replaceChildren(...Object.entries(logs).map(([name, log]) => logPanel(name, log)));
  for (const pre of el.querySelectorAll('pre[data-log]')) {
    if (stuck[pre.dataset.log] !== false) pre.scrollTop = pre.scrollHeight;
  }
}

function events(list) {
  return [h('h2', {}, 'Pod events'),
    table([{title: 'Time'}, {title: 'State'}, {title: 'Goal'}, {title: 'Run'}, {title: 'Host'},
      {title: 'Message', cls: 'message'}],
    list.map((e) => [time(e.time), badge(e.state), e.goal_state, h('code', {}, e.run_id), e.host,
      [e.message, e.reason ? ` (${e.reason})` : '']]),
    'No events yet.')];
}

export default {
  title: (params) => `Task ${params.instance} of ${params.job}`,
  api: (params) => `/ui/api/jobs/${seg(params.job)}/tasks/${params.instance}`,
  mount(main) {
    const top = h('div');
    const run = h('section', {class: 'panel'});
    const logs = h('div', {class: 'logs'});
    const evs = h('section', {class: 'panel'});
    main.append(top, run, logs, evs);
    const drawTop = region(top), drawRun = region(run), drawEvents = region(evs);
    let lastLogs = '';
    let forecast = null;  // made once, on the first draw: it keeps its answer across refreshes
    return (d) => {
      if (!forecast) {
        forecast = forecastPanel(d.job_id, d.task.instance);
        run.after(forecast);
      }
      forecast.hidden = !WAITING.includes(d.task.state);
      document.title = `Task ${d.task.instance} · ${d.job_name || d.job_id} · Peloton`;
      drawTop({job_id: d.job_id, job_name: d.job_name,
        task: {instance: d.task.instance, name: d.task.name, state: d.task.state}}, header);
      drawRun(d.task, runtime);
      const json = JSON.stringify(d.logs);
      if (json !== lastLogs) {
        lastLogs = json;
        drawLogs(logs, d.logs);
      }
      drawEvents(d.events, events);
    };
  },
};
