// Hosts: every host with its maintenance state, filterable by state, with the maintenance actions
// (start: drain its tasks, then DOWN; complete: back UP).

import {actionButton} from '../actions.js';
import {seg} from '../api.js';
import {amount, badge, counts, h, region, table} from '../dom.js';

const HOST_STATES = ['UP', 'DRAINING', 'DRAINED', 'DOWN'];

function maintenance(host) {
  const path = `/ui/api/hosts/${seg(host.hostname)}/maintenance`;
  if (host.state === 'UP') {
    return actionButton('Start maintenance', {path: `${path}/start`, title: `Drain ${host.hostname}?`,
      confirm: 'Start maintenance', text: `Tasks on ${host.hostname} are moved to other hosts; ` +
        'then it goes DOWN and gets no new tasks until maintenance completes.'},
    {danger: true, small: true, key: `maint-${host.hostname}`});
  }
  if (['DRAINING', 'DRAINED', 'DOWN'].includes(host.state)) {
    return actionButton('Complete maintenance', {path: `${path}/complete`, title: `Bring ${host.hostname} back?`,
      confirm: 'Complete maintenance', text: `${host.hostname} goes UP and takes new tasks again.`},
    {small: true, key: `maint-${host.hostname}`});
  }
  return '';
}

function used(cap, kind) {
  if (!cap) return '';
  if (kind === 'gpu' && !cap.total.gpu) return '';
  return h('span', {class: 'amounts', 'data-kind': kind},
    `${amount(kind, cap.allocated[kind])} / ${amount(kind, cap.total[kind])}`);
}

function totals(cluster) {
  if (!cluster) return null;
  const kinds = ['cpu', 'memory', 'disk', 'gpu'].filter((k) => k !== 'gpu' || cluster.total.gpu);
  return h('p', {class: 'muted', 'data-cluster': 'true'}, 'Cluster (UP hosts): ',
    kinds.map((k) => `${k} ${amount(k, cluster.allocated[k])} of ${amount(k, cluster.total[k])}`).join(', '),
    ' allocated.');
}

export default {
  title: () => 'Hosts',
  api: (params) => {
    const state = params.query.get('state');
    return `/ui/api/hosts${state ? `?state=${encodeURIComponent(state)}` : ''}`;
  },
  mount(main, params) {
    const state = params.query.get('state') || '';
    const form = h('form', {class: 'filters', method: 'get', action: '/hosts', 'aria-label': 'Filter hosts'},
      h('label', {}, 'State', h('select', {name: 'state'}, h('option', {value: ''}, 'Any'),
        HOST_STATES.map((s) => h('option', {value: s, selected: s === state}, s)))),
      h('button', {type: 'submit', class: 'button primary'}, 'Filter'));
    const list = h('section', {class: 'panel', 'aria-labelledby': 'hosts-title'});
    main.append(h('h1', {id: 'hosts-title'}, 'Hosts'), form, list);
    const draw = region(list);
    return (data) => draw(data, (d) => [
      counts(d.by_state, 'hosts'), totals(d.cluster),
      table([{title: 'Host'}, {title: 'IP'}, {title: 'State'}, {title: 'CPU', num: true},
        {title: 'Memory', num: true}, {title: 'Disk', num: true}, {title: 'GPU', num: true},
        {title: 'Tasks', num: true}, {title: 'Goal'}, {title: 'Host pool'}, {title: 'Labels'},
        {title: 'Maintenance'}],
      d.hosts.map((host) => [h('span', {'data-host': host.hostname}, host.hostname), host.ip, badge(host.state),
        used(host.capacity, 'cpu'), used(host.capacity, 'memory'), used(host.capacity, 'disk'),
        used(host.capacity, 'gpu'), host.capacity ? String(host.capacity.tasks) : '',
        host.goal_state, host.pool, host.labels.map((l) => `${l.key}=${l.value}`).join(', '), maintenance(host)]),
      'No hosts match.', 'Each resource: allocated / total on the host.')]);
  },
};
