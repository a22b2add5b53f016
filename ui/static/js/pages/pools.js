// Pools: the resource pool tree with, per resource kind, what each pool has allocated against its
// reservation (guaranteed) and limit (most it may use); what it is entitled to now, what is
// queued (demand, tasks) and whether a gang holds a backfill reservation there.

import {amount, h, meter, region, table} from '../dom.js';

const KINDS = ['cpu', 'memory', 'disk', 'gpu'];
const KIND_NAMES = {cpu: 'CPU', memory: 'Memory', disk: 'Disk', gpu: 'GPU'};

function cell(pool, kind) {
  const used = pool.allocation[kind], res = pool.reservation[kind], lim = pool.limit[kind];
  if (pool.path === '/') return h('span', {class: 'amounts'}, `${amount(kind, used)} allocated`);
  return [h('span', {class: 'amounts'}, `${amount(kind, used)} / ${amount(kind, res)} / ${amount(kind, lim)}`),
    meter(used, res, lim, `${KIND_NAMES[kind]}: ${amount(kind, used)} allocated, ${amount(kind, res)} ` +
      `reserved, ${amount(kind, lim)} limit`)];
}

function live(p) {
  if (!p.live) return '';
  const e = p.live.entitlement;
  return h('span', {class: 'amounts', 'data-entitled': p.path},
    `${amount('cpu', e.cpu)} cpu, ${amount('memory', e.memory)}`);
}

function queued(p) {
  if (!p.live || p.path === '/') return '';
  const l = p.live;
  const parts = [`${l.queued_tasks} tasks`];
  if (l.queued_tasks) parts.push(`${amount('cpu', l.demand.cpu)} cpu, ${amount('memory', l.demand.memory)}`);
  if (l.limit_above_capacity.length) parts.push(`limit above cluster (${l.limit_above_capacity.join(', ')})`);
  if (l.reserved_for) parts.push(`reservation: ${l.reserved_for}`);
  return h('span', {'data-queued': p.path}, parts.join('; '));
}

export default {
  title: () => 'Resource pools',
  api: () => '/ui/api/pools',
  mount(main) {
    const list = h('section', {class: 'panel', 'aria-labelledby': 'pools-title'});
    main.append(h('h1', {id: 'pools-title'}, 'Resource pools'), list);
    const draw = region(list);
    return (data) => draw(data.pools, (pools) => [
      h('p', {class: 'muted'}, 'Each cell: allocated / reserved / limit. The bar fills with the allocation; ' +
        'its mark is the reservation. Memory and disk in MB or GB.'),
      table([{title: 'Pool'}, ...KINDS.map((k) => ({title: KIND_NAMES[k]})), {title: 'Entitled now'},
        {title: 'Queued'}, {title: 'Team'}],
        pools.map((p) => [
          h('span', {style: `padding-left:${Math.max(0, p.depth - 1) * 18}px`, 'data-pool': p.path, title: p.id},
            p.path === '/' ? '/ (root: the whole cluster)' : p.name),
          ...KINDS.map((k) => cell(p, k)), live(p), queued(p), p.team]),
        'No resource pools.')]);
  },
};
