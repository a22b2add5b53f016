// Overview: hosts, jobs and tasks by state, the cluster's capacity (what its UP hosts have and
// what runs on them hold), what the top-level pools reserve and limit against what is allocated
// (a limit above the cluster's capacity is flagged), and the pools at a glance.

import {amount, counts, h, meter, region, stackbar, table} from '../dom.js';

const KINDS = ['cpu', 'memory', 'disk', 'gpu'];
const KIND_NAMES = {cpu: 'CPU', memory: 'Memory', disk: 'Disk', gpu: 'GPU'};

function card(title, ...body) {
  return h('section', {class: 'panel', 'aria-label': title}, h('h2', {}, title), body);
}

function capacity(d) {
  if (!d.cluster) return null;
  const c = d.cluster;
  const kinds = KINDS.filter((k) => k !== 'gpu' || c.total.gpu);
  return [
    table([{title: 'Resource'}, {title: 'On hosts', num: true}, {title: 'Allocated on hosts', num: true}],
      kinds.map((k) => [KIND_NAMES[k], h('span', {class: 'amounts', 'data-capacity': k}, amount(k, c.total[k])),
        h('span', {class: 'amounts'}, amount(k, c.allocated[k]))]), '',
      `The cluster: ${c.hosts_up} UP host(s). "Allocated" in the table below counts admitted work, ` +
      'placed or not.'),
    ...d.over.map((o) => h('p', {class: 'warning', 'data-over-capacity': o.path},
      `Pool ${o.path}: its ${o.kinds.join(', ')} limit is above what the cluster has.`)),
  ];
}

function resources(data) {
  const rows = KINDS.map((kind) => {
    const used = data.allocation[kind], res = data.reservation[kind], lim = data.limit[kind];
    return [KIND_NAMES[kind], h('span', {class: 'amounts'}, amount(kind, used)),
      h('span', {class: 'amounts'}, amount(kind, res)), h('span', {class: 'amounts'}, amount(kind, lim)),
      meter(used, res, lim, `${KIND_NAMES[kind]}: ${amount(kind, used)} allocated, ` +
        `${amount(kind, res)} reserved, ${amount(kind, lim)} limit`)];
  });
  return table([{title: 'Resource'}, {title: 'Allocated', num: true}, {title: 'Reserved', num: true},
    {title: 'Limit', num: true}, {title: 'Allocation', cls: 'meter-cell'}], rows, '',
  'Totals over the top-level resource pools; the mark on each bar is the reservation.');
}

export default {
  title: () => 'Overview',
  api: () => '/ui/api/overview',
  mount(main) {
    const cards = h('div', {class: 'grid'});
    const res = h('section', {class: 'panel', 'aria-labelledby': 'res-title'});
    const poolList = h('section', {class: 'panel', 'aria-labelledby': 'pools-title'});
    main.append(h('h1', {}, 'Cluster overview'), cards, res, poolList);
    const drawCards = region(cards);
    const drawRes = region(res);
    const drawPools = region(poolList);
    return (data) => {
      drawCards({hosts: data.hosts, jobs: data.jobs, tasks: data.tasks}, (d) => [
        card('Hosts', h('p', {class: 'big'}, String(d.hosts.total)), counts(d.hosts.by_state, 'hosts'),
          h('p', {}, h('a', {href: '/hosts'}, 'All hosts'))),
        card('Jobs', h('p', {class: 'big'}, String(d.jobs.total)), counts(d.jobs.by_state, 'jobs'),
          d.jobs.counted < d.jobs.total ? h('p', {class: 'muted'}, `States of the newest ${d.jobs.counted}.`) : null,
          h('p', {}, h('a', {href: '/jobs'}, 'All jobs'))),
        card('Tasks', h('p', {class: 'big'}, String(Object.values(d.tasks.by_state).reduce((a, b) => a + b, 0))),
          stackbar(d.tasks.by_state), counts(d.tasks.by_state, 'tasks')),
      ]);
      drawRes({allocation: data.allocation, reservation: data.reservation, limit: data.limit,
        cluster: data.cluster, over: data.over_capacity}, (d) => [
        h('h2', {id: 'res-title'}, 'Resources'), ...(capacity(d) || []), resources(d)]);
      drawPools(data.pools, (pools) => [
        h('h2', {id: 'pools-title'}, 'Resource pools'),
        table([{title: 'Pool'}, {title: 'CPU allocated / limit', num: true},
          {title: 'Memory allocated / limit', num: true}, {title: 'Team'}],
        pools.filter((p) => p.depth > 0).map((p) => [
          h('a', {href: '/pools', style: `padding-left:${(p.depth - 1) * 16}px`}, p.path),
          `${amount('cpu', p.allocation.cpu)} / ${amount('cpu', p.limit.cpu)}`,
          `${amount('memory', p.allocation.memory)} / ${amount('memory', p.limit.memory)}`, p.team]),
        'No resource pools yet: create one with `peloton respool create`.')]);
    };
  },
};
