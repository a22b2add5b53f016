// Overview: hosts, jobs and tasks by state, what the top-level pools reserve and limit against
// what is allocated, and the pools at a glance.

import {amount, counts, h, meter, region, stackbar, table} from '../dom.js';

const KINDS = ['cpu', 'memory', 'disk', 'gpu'];
const KIND_NAMES = {cpu: 'CPU', memory: 'Memory', disk: 'Disk', gpu: 'GPU'};

function card(title, ...body) {
  return h('section', {class: 'panel', 'aria-label': title}, h('h2', {}, title), body);
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
      drawRes({allocation: data.allocation, reservation: data.reservation, limit: data.limit}, (d) => [
        h('h2', {id: 'res-title'}, 'Resources'), resources(d)]);
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
