// Job: what it asks for, how it is doing, why its waiting tasks wait (the explain story: pool
// entitlement and queue, cluster capacity, each group of tasks' reason), its tasks, its current
// workflow (with pause, resume and abort) and the workflows before it. Stop, start and restart
// act on every instance.

import {actionButton} from '../actions.js';
import {seg} from '../api.js';
import {forecastPanel} from '../forecast.js';
import {amount, badge, counts, facts, h, region, since, stackbar, table, time} from '../dom.js';

function ports(map) {
  const entries = Object.entries(map || {});
  return entries.length ? entries.map(([name, port]) => `${name}=${port}`).join(', ') : '';
}

function header(d) {
  const path = `/ui/api/jobs/${seg(d.job.id)}`;
  const name = d.job.name || d.job.id;
  const service = d.job.type === 'SERVICE';
  return [
    h('p', {class: 'breadcrumbs'}, h('a', {href: '/jobs'}, 'Jobs'), ' › ', name),
    h('h1', {}, name, badge(d.runtime.state),
      h('div', {class: 'actions'},
        actionButton('Restart', {path: `${path}/restart`, title: `Restart job ${name}?`, confirm: 'Restart',
          text: service ? 'Every instance gets a new run, a batch at a time (0: all at once).'
            : 'Every instance is killed and started again.',
          number: service ? {label: 'Batch size', name: 'batch_size', value: 1} : null}),
        actionButton('Start', {path: `${path}/start`, title: `Start job ${name}?`, confirm: 'Start',
          text: 'Stopped instances are started again.'}),
        actionButton('Stop', {path: `${path}/stop`, title: `Stop job ${name}?`, confirm: 'Stop job',
          text: `Every instance of ${name} (${d.job.id}) is killed. This cannot be undone, ` +
            'but the job can be started again.'}, {danger: true}))),
  ];
}

function summary(d) {
  const j = d.job, r = d.runtime;
  const res = ['cpu', 'memory', 'disk', 'gpu'].filter((k) => j.resources[k] > 0)
    .map((k) => `${k} ${amount(k, j.resources[k])}`).join(', ');
  return h('div', {class: 'grid'},
    h('section', {class: 'panel', 'aria-label': 'Configuration'}, h('h2', {}, 'Configuration'), facts([
      ['ID', h('code', {}, j.id)], ['Type', j.type], ['Owner', j.owner], ['Team', j.team],
      ['Pool', j.pool], ['Instances', String(j.instances)], ['Per task', res],
      ['Command', j.command ? h('code', {}, j.command) : ''], ['Ports', j.ports.join(', ')],
      ['Priority', `${j.priority}${j.preemptible ? ' (preemptible)' : ''}`],
      ['Max failures', String(j.max_failures)], ['Description', j.description]])),
    h('section', {class: 'panel', 'aria-label': 'Status'}, h('h2', {}, 'Status'), facts([
      ['State', badge(r.state)], ['Goal state', badge(r.goal_state)], ['Created', time(r.created)],
      ['Started', time(r.started)], ['Completed', time(r.completed)],
      ['Config version', String(r.config_version)]]),
    stackbar(r.task_states), counts(r.task_states, 'tasks')));
}

function progress(w) {
  const pct = (n) => (w.total ? (100 * n) / w.total : 0).toFixed(1);
  return h('div', {class: 'progress', role: 'progressbar', 'aria-valuemin': 0, 'aria-valuemax': w.total,
    'aria-valuenow': w.completed + w.failed, 'aria-label': 'Instances done'},
  h('span', {class: 'done', style: `width:${pct(w.completed)}%`}),
  h('span', {class: 'failed', style: `width:${pct(w.failed)}%`}));
}

function workflow(d) {
  const w = d.workflow;
  if (!w) return [h('h2', {}, 'Workflow'), h('p', {class: 'muted'}, 'No workflow has run on this job.')];
  const path = `/ui/api/jobs/${seg(d.job.id)}/workflow`;
  const buttons = [];
  if (w.active && w.state !== 'PAUSED') {
    buttons.push(actionButton('Pause', {path: `${path}/pause`, title: 'Pause the workflow?', confirm: 'Pause',
      text: 'Instances in flight finish; no new batch starts until it is resumed.'}));
  }
  if (w.state === 'PAUSED') {
    buttons.push(actionButton('Resume', {path: `${path}/resume`, title: 'Resume the workflow?', confirm: 'Resume',
      text: 'The workflow carries on with its next batch.'}));
  }
  if (w.active) {
    buttons.push(actionButton('Abort', {path: `${path}/abort`, title: 'Abort the workflow?', confirm: 'Abort',
      text: 'Instances are left as they are now; the workflow cannot be resumed.'}, {danger: true}));
  }
  return [
    h('h2', {}, w.active ? 'Current workflow' : 'Latest workflow'),
    h('div', {class: 'row'}, h('span', {}, w.type), badge(w.state), h('div', {class: 'actions'}, buttons)),
    progress(w),
    facts([['Done', `${w.completed} of ${w.total}${w.failed ? `, ${w.failed} failed` : ''}`],
      ['In flight', w.current.join(', ')], ['Batch size', w.batch_size ? String(w.batch_size) : 'all'],
      ['Version', `${w.prev_version} → ${w.version}`], ['Started', time(w.created)],
      ['Finished', time(w.finished)], ['Workflow ID', h('code', {}, w.update_id)]]),
  ];
}

function why(x) {
  if (!x.waiting.length) return [];
  const pool = x.pool || {};
  const cluster = x.cluster || {};
  const items = [];
  if (pool.path) {
    items.push(['Pool', `${pool.path}: entitled to ${pool.entitlement} now; allocated ${pool.allocation}; ` +
      `queued demand ${pool.demand} (${pool.queued_tasks} tasks queued)`]);
    if (pool.limit_above_capacity.length) {
      items.push(['Note', `its ${pool.limit_above_capacity.join(', ')} limit is above what the cluster has`]);
    }
    if (pool.reserved_for) items.push(['Backfill', `${pool.reserved_for} holds a reservation`]);
  }
  if (cluster.total) {
    items.push(['Cluster', `${cluster.hosts_up} UP host(s): ${cluster.total} in all, ${cluster.allocated} ` +
      `allocated${cluster.largest ? `; largest ${cluster.largest.hostname} (${cluster.largest.total})` : ''}`]);
  }
  return [h('h2', {id: 'why-title'}, 'Why tasks wait'), facts(items),
    h('ul', {class: 'reasons'}, x.waiting.map((g) => h('li', {'data-waiting': g.instances.join(',')},
      h('strong', {}, `${g.instances.length === 1 ? 'Instance' : 'Instances'} ${ranges(g.instances)} ` +
        `(${g.state}): `), g.reason)))];
}

function ranges(list) {
  const out = [];
  for (let i = 0; i < list.length; i++) {
    let j = i;
    while (j + 1 < list.length && list[j + 1] === list[j] + 1) j++;
    out.push(i === j ? String(list[i]) : `${list[i]}-${list[j]}`);
    i = j;
  }
  return out.join(', ');
}

function tasks(d) {
  return [h('h2', {id: 'tasks-title'}, `Tasks (${d.tasks.length})`),
    table([{title: 'Instance', num: true}, {title: 'State'}, {title: 'Goal'}, {title: 'Host'}, {title: 'Ports'},
      {title: 'Started'}, {title: 'Ran for'}, {title: 'Failures', num: true}, {title: 'Message', cls: 'message'}],
    d.tasks.map((t) => [
      h('a', {href: `/jobs/${seg(d.job.id)}/tasks/${t.instance}`, 'data-key': `task-${t.instance}`}, String(t.instance)),
      badge(t.state), t.goal_state, t.host, ports(t.ports), time(t.started), since(t.started, t.completed),
      String(t.failures), [t.message, t.reason && t.reason !== t.message ? ` (${t.reason})` : '']]),
    'This job has no tasks.')];
}

function history(d) {
  return [h('h2', {}, 'Workflow history'),
    table([{title: 'Type'}, {title: 'State'}, {title: 'Done', num: true}, {title: 'Failed', num: true},
      {title: 'Batch', num: true}, {title: 'Version'}, {title: 'Started'}, {title: 'Finished'}],
    d.workflows.map((w) => [w.type, badge(w.state), `${w.completed}/${w.total}`, String(w.failed),
      w.batch_size ? String(w.batch_size) : 'all', w.version, time(w.created), time(w.finished)]),
    'No workflows yet.')];
}

export default {
  title: (params) => `Job ${params.job}`,
  api: (params) => `/ui/api/jobs/${seg(params.job)}`,
  mount(main) {
    const parts = {header: h('div'), summary: h('div'),
      why: h('section', {class: 'panel why', 'aria-labelledby': 'why-title'}),
      workflow: h('section', {class: 'panel'}),
      tasks: h('section', {class: 'panel', 'aria-labelledby': 'tasks-title'}), history: h('section', {class: 'panel'})};
    let forecast = null;  // made once, on the first draw: it keeps its answer across refreshes
    main.append(...Object.values(parts));
    const draw = Object.fromEntries(Object.entries(parts).map(([k, el]) => [k, region(el)]));
    return (d) => {
      document.title = `${d.job.name || d.job.id} · Jobs · Peloton`;
      draw.header({job: d.job, runtime: {state: d.runtime.state}}, header);
      // Each region gets only what it shows, so it is redrawn only when that changed.
      draw.summary({job: d.job, runtime: d.runtime}, summary);
      parts.why.hidden = !d.explain.waiting.length;
      draw.why(d.explain, why);
      if (!forecast) {
        forecast = forecastPanel(d.job.id);
        parts.why.after(forecast);
      }
      forecast.hidden = !d.explain.waiting.length;
      draw.workflow({job: {id: d.job.id}, workflow: d.workflow}, workflow);
      draw.tasks({job: {id: d.job.id}, tasks: d.tasks}, tasks);
      draw.history({workflows: d.workflows}, history);
    };
  },
};
