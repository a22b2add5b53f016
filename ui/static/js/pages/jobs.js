// Jobs: a filter form (a plain GET form, so a filtered list is a bookmarkable URL) and the
// matching jobs, newest first, with their task states.

import {badge, counts, h, region, table, time} from '../dom.js';

const JOB_STATES = ['INITIALIZED', 'PENDING', 'RUNNING', 'SUCCEEDED', 'FAILED', 'KILLING', 'KILLED',
  'UNINITIALIZED', 'DELETED'];

function field(label, input) {
  return h('label', {}, label, input);
}

function filters(query) {
  const stateSelect = h('select', {name: 'state'}, h('option', {value: ''}, 'Any'),
    JOB_STATES.map((s) => h('option', {value: s, selected: query.get('state') === s}, s)));
  return h('form', {class: 'filters', method: 'get', action: '/jobs', role: 'search', 'aria-label': 'Filter jobs'},
    field('State', stateSelect),
    field('Name contains', h('input', {name: 'name', type: 'search', value: query.get('name') || ''})),
    field('Owner', h('input', {name: 'owner', type: 'search', value: query.get('owner') || ''})),
    field('Pool', h('input', {name: 'pool', type: 'search', placeholder: '/path', value: query.get('pool') || '',
      list: 'pool-paths'})),
    h('datalist', {id: 'pool-paths'}),
    h('button', {type: 'submit', class: 'button primary'}, 'Filter'),
    h('a', {href: '/jobs', class: 'button'}, 'Clear'));
}

export default {
  title: () => 'Jobs',
  api: (params) => {
    const q = new URLSearchParams();
    for (const key of ['state', 'name', 'owner', 'pool', 'limit']) {
      const value = params.query.get(key);
      if (value) q.set(key, value);
    }
    return `/ui/api/jobs?${q}`;
  },
  mount(main, params) {
    const list = h('section', {class: 'panel', 'aria-labelledby': 'jobs-title'});
    main.append(h('h1', {id: 'jobs-title'}, 'Jobs'), filters(params.query), list);
    fetch('/ui/api/pools').then((r) => r.json()).then((data) => {
      document.getElementById('pool-paths').replaceChildren(
        ...(data.pools || []).filter((p) => p.depth > 0).map((p) => h('option', {value: p.path})));
    }).catch(() => {});
    const draw = region(list);
    return (data) => draw(data, (d) => [
      h('p', {class: 'muted'}, `${d.total} job${d.total === 1 ? '' : 's'}` +
        (d.jobs.length < d.total ? `, showing the newest ${d.jobs.length}` : '')),
      table([{title: 'Name'}, {title: 'State'}, {title: 'Type'}, {title: 'Owner'}, {title: 'Team'},
        {title: 'Pool'}, {title: 'Instances', num: true}, {title: 'Tasks'}, {title: 'Created'}],
      d.jobs.map((j) => [
        h('a', {href: `/jobs/${encodeURIComponent(j.id)}`, 'data-job-id': j.id, title: j.id}, j.name || j.id),
        badge(j.state), j.type, j.owner, j.team, j.pool, String(j.instances),
        counts(j.task_states, 'tasks'), time(j.created)]),
      'No jobs match these filters.')]);
  },
};
