// The Jobs list: "Job Queue" with its tabs and counts, Go to Job ID…, Refresh, auto-refresh
// every 10 s (paused while the tab is hidden), every column of DESIGN §8, Retry/Cancel by role.
import * as api from './api.js';
import { certificateNames } from './catalog.js';
import { h, pagerLinks, replace } from './dom.js';
import * as fmt from './format.js';
import { feedback, jobActionButtons } from './job_actions.js';
import { href, navigate } from './router.js';

export const tabs = /** @type {const} */ ([
  ['all', 'All'], ['pending', 'Pending'], ['active', 'Active'], ['completed', 'Completed'],
  ['failed', 'Failed'], ['dead', 'Dead'], ['cancelled', 'Cancelled'],
]);

const columns = ['Type', 'Status', 'Certificate', 'Triggered By', 'Attempts', 'Progress', 'Created', 'Duration', 'Error', 'Actions'];

/** @param {string} s */
export function isJobId(s) { return /^[0-9a-f]{24}$/.test(s); }

/** @param {import('./router.js').PageContext} ctx @returns {import('./router.js').PageHandle} */
export function renderJobs(ctx) {
  const { project, query } = ctx;
  const status = tabs.some(([k]) => k === query.get('status')) ? /** @type {string} */ (query.get('status')) : 'all';
  const type = query.get('type') ?? '';
  const page = Math.max(1, Number.parseInt(query.get('page') ?? '1', 10) || 1);
  const fb = feedback();
  let disposed = false;
  /** @type {ReturnType<typeof setInterval> | null} */
  let timer = null;

  const badge = h('span', { class: 'badge live', id: 'auto-refresh', text: 'Auto-refreshing' });
  const gotoInput = h('input', {
    id: 'goto-job', type: 'search', placeholder: 'Go to Job ID…', 'aria-label': 'Go to Job ID…',
    autocomplete: 'off', spellcheck: 'false', maxlength: '24',
  });
  const gotoMsg = h('span', { class: 'goto-msg', id: 'goto-msg', role: 'status', 'aria-live': 'polite' });
  const gotoForm = h('form', { class: 'goto', role: 'search' }, gotoInput,
    h('button', { type: 'submit', text: 'Go' }), gotoMsg);
  gotoForm.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const id = gotoInput.value.trim().toLowerCase();
    gotoMsg.className = 'goto-msg';
    if (!isJobId(id)) {
      gotoMsg.className = 'goto-msg error';
      gotoMsg.textContent = 'A job ID is 24 hexadecimal characters';
      return;
    }
    try {
      await api.get(api.projectPath(project, `/jobs/${id}`));
      navigate(href(`/jobs/${id}`, { project }));
    } catch (e) {
      gotoMsg.className = 'goto-msg error';
      gotoMsg.textContent = e instanceof api.ApiError && e.status === 404 ? `Job ${id} not found` : api.errorText(e);
    }
  });
  const refreshBtn = h('button', { type: 'button', id: 'refresh', text: 'Refresh', title: 'Refresh (r)' });
  refreshBtn.addEventListener('click', () => { void load(); });

  const tabNav = h('nav', { class: 'tabs', 'aria-label': 'Job status' });
  const typeNote = type ? h('p', { class: 'filter-note' }, 'Type: ', h('strong', { text: fmt.typeLabel(type) }), ' ',
    h('a', { href: href('/jobs', { project, status: status === 'all' ? null : status }), text: 'Show all types' })) : null;
  const tbody = h('tbody');
  const table = h('table', { class: 'jobs-table' },
    h('caption', { class: 'visually-hidden', text: 'Jobs' }),
    h('thead', null, h('tr', null, ...columns.map((c) => h('th', { scope: 'col', text: c })))), tbody);
  const pager = h('nav', { class: 'pager', 'aria-label': 'Pages' });
  const state = h('p', { class: 'muted', role: 'status', id: 'jobs-state' });

  replace(ctx.root,
    h('div', { class: 'page-head' }, h('h1', { text: 'Job Queue' }), badge,
      h('div', { class: 'page-tools' }, gotoForm, refreshBtn)),
    fb.el, tabNav, typeNote, h('div', { class: 'table-wrap' }, table), state, pager);

  /** @param {Record<string, number> | undefined} counts */
  function renderTabs(counts) {
    replace(tabNav, ...tabs.map(([key, label]) => {
      const n = counts?.[key];
      return h('a', {
        href: href('/jobs', { project, status: key === 'all' ? null : key, type: type || null }),
        class: 'tab', 'data-tab': key, 'aria-current': key === status ? 'page' : null,
      }, label, ' ', h('span', { class: 'count', 'data-count': key, text: typeof n === 'number' ? String(n) : '–' }));
    }));
  }

  /** @param {any} job @param {Map<string, string>} certs */
  function row(job, certs) {
    const kind = fmt.childKind(job);
    const detail = href(`/jobs/${job.id}`, { project });
    const err = typeof job.error === 'string' && job.error ? job.error : '';
    const cert = job.certificate_id
      ? h('a', { href: href(`/certificates/${job.certificate_id}`, { project }), text: certs.get(job.certificate_id) ?? job.certificate_id.slice(0, 8) })
      : '';
    const tr = h('tr', { class: 'job-row', 'data-job-id': job.id, 'data-status': job.status },
      h('td', { class: 'type-cell' }, h('a', { href: detail, class: 'job-link', text: fmt.typeLabel(job.type) }), ' ',
        kind ? h('span', { class: 'tag child', text: 'child', title: kind === 'batch' ? 'batch child of a fan-out run' : 'retry child of a fan-out run' }) : null),
      h('td', null, fmt.statusTag(fmt.shownStatus(job))),
      h('td', null, cert),
      h('td', { text: fmt.triggeredBy(job) }),
      h('td', { class: 'num', text: `${job.attempts} / ${job.max_attempts}` }),
      h('td', null, fmt.progress(job.progress, `Progress of job ${job.id}`, job.status === 'failed' || job.status === 'dead')),
      h('td', null, fmt.timeEl(job.created_at)),
      h('td', { class: 'num', text: fmt.isLive(job) ? '' : fmt.duration(job) }),
      h('td', { class: 'error-cell' }, err ? h('span', { class: 'tag error-tag', title: err, text: err }) : ''),
      h('td', { class: 'actions' }, ...jobActionButtons(job, project, fb, () => { void load(); })));
    tr.addEventListener('click', (ev) => {
      if (ev.target instanceof Element && ev.target.closest('a, button')) return;
      navigate(detail);
    });
    return tr;
  }

  async function load() {
    const q = new URLSearchParams();
    if (status !== 'all') q.set('status', status);
    if (type) q.set('type', type);
    if (page > 1) q.set('page', String(page));
    try {
      const [r, certs] = await Promise.all([
        api.get(api.projectPath(project, `/jobs${q.size ? `?${q}` : ''}`)),
        certificateNames(project),
      ]);
      if (disposed) return;
      renderTabs(r.counts);
      const items = Array.isArray(r.items) ? r.items : [];
      replace(tbody, ...items.map((/** @type {any} */ j) => row(j, certs)));
      state.textContent = items.length ? '' : 'No jobs here.';
      const pages = Math.max(1, Math.ceil((r.total ?? 0) / (r.page_size || 1)));
      replace(pager, ...pagerLinks(page, pages, (n) => href('/jobs', { project, status: status === 'all' ? null : status, type: type || null, page: n })));
    } catch (e) {
      if (disposed) return;
      state.textContent = '';
      fb.fail(api.errorText(e));
    }
  }

  function schedule() {
    if (timer) clearInterval(timer);
    timer = null;
    if (document.hidden) {
      badge.textContent = 'Auto-refresh paused';
      badge.className = 'badge paused';
      return;
    }
    badge.textContent = 'Auto-refreshing';
    badge.className = 'badge live';
    timer = setInterval(() => { void load(); }, 10000);
  }
  const onVisibility = () => { schedule(); if (!document.hidden) void load(); };
  document.addEventListener('visibilitychange', onVisibility);

  renderTabs(undefined);
  void load();
  schedule();
  return {
    refresh() { void load(); },
    dispose() {
      disposed = true;
      if (timer) clearInterval(timer);
      document.removeEventListener('visibilitychange', onVisibility);
    },
  };
}
