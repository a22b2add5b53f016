// Pools: the resource pool tree with, per resource kind, what each pool has allocated against its
// reservation (guaranteed) and limit (most it may use).

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
      table([{title: 'Pool'}, ...KINDS.map((k) => ({title: KIND_NAMES[k]})), {title: 'Team'}],
        pools.map((p) => [
          h('span', {style: `padding-left:${Math.max(0, p.depth - 1) * 18}px`, 'data-pool': p.path, title: p.id},
            p.path === '/' ? '/ (root: the whole cluster)' : p.name),
          ...KINDS.map((k) => cell(p, k)), p.team]),
        'No resource pools.')]);
  },
};
