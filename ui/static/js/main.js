// The page shell's router and refresh loop. Every page is a module with
//   title(params) -> string, api(params) -> JSON path to poll, mount(main, params) -> update(data)
// The loop polls the page's API path every few seconds (the server's --refresh setting), one read
// at a time, slower while the tab is hidden, and at once after any action. A path no page
// serves, and a page whose job or task does not exist (or whose id is malformed), show a
// "not found" page and stop polling: asking again cannot make them exist.

import {onActionDone} from './actions.js';
import {getJSON} from './api.js';
import {h, tickDurations} from './dom.js';
import hosts from './pages/hosts.js';
import job from './pages/job.js';
import jobs from './pages/jobs.js';
import overview from './pages/overview.js';
import pools from './pages/pools.js';
import task from './pages/task.js';

const ROUTES = [
  [/^\/$/, overview, 'overview'],
  [/^\/jobs\/?$/, jobs, 'jobs'],
  [/^\/jobs\/([^/]+)\/tasks\/(\d+)\/?$/, task, 'jobs'],
  [/^\/jobs\/([^/]+)\/?$/, job, 'jobs'],
  [/^\/pools\/?$/, pools, 'pools'],
  [/^\/hosts\/?$/, hosts, 'hosts'],
];

const refreshMs = Number(document.querySelector('meta[name="peloton-refresh-ms"]').content) || 2000;
const statusEl = document.getElementById('refresh-status');
const banner = document.getElementById('banner');

function route() {
  for (const [pattern, page, nav] of ROUTES) {
    const match = pattern.exec(location.pathname);
    if (match) {
      const [, job, instance] = match.map((part) => (part === undefined ? part : decodeURIComponent(part)));
      return {page, nav, params: {job, instance, query: new URLSearchParams(location.search)}};
    }
  }
  return null;
}

function showError(err) {
  banner.textContent = `${err.message}${err.kind ? ` (${err.kind})` : ''}`;
  banner.dataset.kind = err.kind || '';
  banner.hidden = false;
}

function notFound(main, what) {
  document.title = 'Not found · Peloton';
  main.replaceChildren(h('section', {class: 'panel not-found', 'data-not-found': 'true'},
    h('h1', {}, 'Not found'), h('p', {}, what),
    h('p', {}, 'Go to the ', h('a', {href: '/'}, 'overview'), ' or the ', h('a', {href: '/jobs'}, 'jobs'),
      '; scripts can start from the ', h('a', {href: '/ui/api/'}, 'JSON API index'), '.')));
  statusEl.textContent = '';
  document.body.dataset.loaded = 'true';
}

function start() {
  const found = route();
  const main = document.getElementById('main');
  if (!found) {
    notFound(main, `No page at ${location.pathname}.`);
    return;
  }
  const {page, nav, params} = found;
  for (const link of document.querySelectorAll('[data-nav]')) {
    if (link.dataset.nav === nav) link.setAttribute('aria-current', 'page');
  }
  document.title = `${page.title(params)} · Peloton`;
  let update = null;
  let timer = 0;
  let generation = 0;
  let stopped = false;

  async function tick() {
    clearTimeout(timer);
    if (stopped) return;
    const mine = ++generation;
    try {
      const data = await getJSON(page.api(params));
      if (mine !== generation) return;
      if (!update) {
        main.replaceChildren();
        update = page.mount(main, params);
      }
      update(data);
      banner.hidden = true;
      statusEl.textContent = `Updated ${new Date().toLocaleTimeString()}`;
      document.body.dataset.loaded = 'true';
    } catch (err) {
      if (mine !== generation) return;
      if (err.kind === 'not_found' || (err.kind === 'invalid_argument' && params.job !== undefined)) {
        stopped = true; // no more polling: the page's subject does not exist
        generation += 1;
        banner.hidden = true;
        notFound(main, err.message);
        return;
      }
      showError(err);
      if (!update) main.replaceChildren(h('p', {class: 'placeholder'}, 'This page could not be loaded.'));
      statusEl.textContent = 'Update failed; retrying';
    } finally {
      if (mine === generation) timer = setTimeout(tick, document.hidden ? refreshMs * 5 : refreshMs);
    }
  }

  onActionDone(tick);
  setInterval(tickDurations, 1000);
  document.addEventListener('visibilitychange', () => { if (!document.hidden) tick(); });
  tick();
}

start();
