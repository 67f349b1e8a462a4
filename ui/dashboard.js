// The Dashboard (issue 31): the console's landing page, what needs an operator in this project,
// from one GET …/dashboard. Jobs per status, and per type with its lane (a count links to the
// Jobs list filtered by it); certificates expired or expiring within the expiry window and the
// soonest of them; distributions running and those whose last run failed; domain checks and
// discovery findings. Refreshed every 30 s while the tab is visible.
import * as api from './api.js';
import { expiry } from './certificates.js';
import { findingTag } from './discovery.js';
import { h, replace, showAlert } from './dom.js';
import * as fmt from './format.js';
import { tabs } from './jobs.js';
import { href } from './router.js';
import { scrollRegion } from './widgets.js';

const refreshMs = 30000;

/**
 * A count that links to the list it counts, or a muted 0.
 * @param {number} n @param {string} link @param {string} label what the link says to a screen reader
 * @param {string} [cls] a class for a non-zero count (warn, error)
 */
function countLink(n, link, label, cls = '') {
  if (!n) return h('span', { class: 'muted', text: '0' });
  return h('a', { href: link, class: `count ${cls}`.trim(), 'aria-label': `${n} ${label}`, text: String(n) });
}

/** @param {string} title @param {string} id @param {...(Node | string | null)} body */
function card(title, id, ...body) {
  return h('section', { class: `card dash-card${id === 'dash-jobs' ? ' dash-wide' : ''}`, 'aria-labelledby': id }, h('h2', { id, text: title }), ...body);
}

/** @param {string} project @param {any} jobs */
function jobsCard(project, jobs) {
  const head = h('tr', null, h('th', { scope: 'col', text: 'Type' }), h('th', { scope: 'col', text: 'Lane' }),
    ...tabs.map(([, label]) => h('th', { scope: 'col', class: 'num', text: label })));
  /** @param {string} name @param {string} lane @param {any} counts @param {string} type '' for every type */
  const row = (name, lane, counts, type) => h('tr', type ? null : { class: 'total-row' },
    h('th', { scope: 'row', text: name }), h('td', { text: lane }),
    ...tabs.map(([status, label]) => {
      const q = { project, ...(type ? { type } : {}), ...(status === 'all' ? {} : { status }) };
      const cls = status === 'dead' || status === 'failed' ? 'error' : '';
      return h('td', { class: 'num' }, countLink(Number(counts?.[status] ?? 0), href('/jobs', q),
        `${status === 'all' ? '' : `${label.toLowerCase()} `}${type ? fmt.typeLabel(type) : ''} jobs`.replace(/\s+/g, ' ').trim(), cls));
    }));
  const rows = [row('All types', '', jobs.counts, ''), ...jobs.by_type.map((/** @type {any} */ t) => row(fmt.typeLabel(String(t.type)), String(t.lane), t.counts, String(t.type)))];
  return card('Jobs', 'dash-jobs',
    scrollRegion('Jobs per type and status', h('table', { class: 'dash-jobs' },
      h('caption', { class: 'visually-hidden', text: 'Jobs per type and status' }), h('thead', null, head), h('tbody', null, ...rows))),
    jobs.by_lane.length ? h('p', { class: 'muted dash-lanes' }, 'Active by lane: ',
      ...jobs.by_lane.map((/** @type {any} */ l, /** @type {number} */ i) => `${i ? ' · ' : ''}${l.lane} ${l.counts.active}`)) : null);
}

/** @param {string} project @param {any} c */
function certificatesCard(project, c) {
  const list = href('/certificates', { project });
  const facts = h('ul', { class: 'dash-facts' },
    h('li', null, countLink(c.expired, list, 'certificates expired', 'error'), ' expired'),
    h('li', null, countLink(c.expiring_soon, list, `certificates expiring within ${c.window_days} days`, 'warn'), ` expiring within ${c.window_days} days`),
    h('li', null, countLink(c.not_issued, list, 'ACME certificates not issued yet', 'warn'), ' not issued yet (ACME)'),
    h('li', { class: 'muted', text: `${c.total} in all` }));
  const soonest = c.soonest.length
    ? h('table', { class: 'dash-list' }, h('caption', { class: 'dash-caption', text: 'Expiring first' }),
      h('tbody', null, ...c.soonest.map((/** @type {any} */ s) => h('tr', null,
        h('th', { scope: 'row' }, h('a', { href: href(`/certificates/${s.id}`, { project }), text: String(s.name) })),
        h('td', null, expiry(String(s.not_after))),
        h('td', { class: 'muted', text: s.source === 'acme' ? 'ACME' : 'uploaded' })))))
    : h('p', { class: 'muted', text: 'No certificate in this project yet.' });
  return card('Certificates', 'dash-certificates', facts, soonest);
}

/** @param {string} project @param {any} d */
function distributionsCard(project, d) {
  /** @param {any} r */
  const line = (r) => h('li', null, h('a', { href: href(`/distributions/${r.id}`, { project }), text: String(r.name) }), ' ',
    fmt.outcomeTag(String(r.status)), ` run ${r.run_no}`,
    r.status === 'running' && r.started_at ? [' since ', fmt.timeEl(String(r.started_at))] : '',
    r.error ? h('span', { class: 'dash-error error-text', title: String(r.error), text: String(r.error) }) : null);
  return card('Distributions', 'dash-distributions',
    h('h3', { text: `Running (${d.running})` }),
    d.running_list.length ? h('ul', { class: 'dash-runs' }, ...d.running_list.map(line)) : h('p', { class: 'muted', text: 'None running.' }),
    h('h3', { text: `Last run failed (${d.failed})` }),
    d.failed_list.length ? h('ul', { class: 'dash-runs' }, ...d.failed_list.map(line)) : h('p', { class: 'muted', text: 'No failed run.' }),
    h('p', { class: 'muted' }, `${d.total} in all · `, h('a', { href: href('/distributions', { project }), text: 'All distributions' })));
}

/** @param {string} project @param {any} c */
function checksCard(project, c) {
  const domains = href('/domains', { project });
  const found = href('/discovery/certificates', { project });
  return card('Checks', 'dash-checks',
    h('h3', { text: 'Domains' }),
    h('ul', { class: 'dash-facts' },
      h('li', null, countLink(c.domains.expiring, domains, 'domains expiring', 'warn'), ' expiring'),
      h('li', null, countLink(c.domains.error, domains, 'domains whose lookup failed', 'error'), ' lookup failed'),
      h('li', null, countLink(c.domains.unknown, domains, 'domains never looked up'), ' not looked up yet'),
      h('li', { class: 'muted', text: `${c.domains.total} watched` })),
    h('h3', { text: 'Discovery' }),
    h('p', null, countLink(c.discovered.with_findings, found, 'discovered certificates with findings', 'warn'),
      ` of ${c.discovered.total} discovered certificates have findings`),
    c.findings.length ? h('ul', { class: 'dash-findings' }, ...c.findings.map((/** @type {any} */ f) => h('li', null,
      h('a', { href: href('/discovery/certificates', { project, finding: String(f.name) }) }, findingTag({ name: String(f.name), severity: String(f.severity), text: '' })),
      ` ${f.count}`))) : null);
}

/** @param {import('./router.js').PageContext} ctx @returns {import('./router.js').PageHandle} */
export function renderDashboard(ctx) {
  const { project } = ctx;
  let disposed = false;
  let timer = 0;
  const asOf = h('span', { class: 'muted', role: 'status' });
  const refreshBtn = h('button', { type: 'button', text: 'Refresh' });
  const state = h('p', { class: 'muted', text: 'Loading…' });
  const grid = h('div', { class: 'dash-grid' });
  replace(ctx.root,
    h('div', { class: 'page-head' }, h('h1', { text: 'Dashboard' }), h('div', { class: 'page-tools' }, asOf, refreshBtn)),
    state, grid);

  async function load() {
    clearTimeout(timer);
    try {
      const d = await api.get(api.projectPath(project, '/dashboard'));
      if (disposed) return;
      state.hidden = !d.truncated;
      if (d.truncated) showAlert(state, 'This project holds more than 100,000 objects of a kind: the counts below are lower bounds.');
      replace(grid, jobsCard(project, d.jobs), certificatesCard(project, d.certificates),
        distributionsCard(project, d.distributions), checksCard(project, d.checks));
      replace(asOf, 'As of ', fmt.timeEl(String(d.generated_at)));
    } catch (e) {
      if (disposed) return;
      state.hidden = false;
      showAlert(state, api.errorText(e));
    }
    if (!disposed) schedule();
  }
  // The next look in refreshMs; a hidden tab waits another interval instead.
  function schedule() { timer = window.setTimeout(() => { if (!document.hidden) void load(); else schedule(); }, refreshMs); }
  refreshBtn.addEventListener('click', () => { void load(); });
  void load();
  return { refresh() { void load(); }, dispose() { disposed = true; clearTimeout(timer); } };
}
