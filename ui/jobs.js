// The Jobs list: "Job Queue" with its tabs and counts, Go to Job ID…, Refresh, auto-refresh
// every 10 s (paused while the tab is hidden), every column of DESIGN §8, Retry/Cancel by role.
import * as api from './api.js';
import { certificateNames } from './catalog.js';
import { h, replace } from './dom.js';
import * as fmt from './format.js';
import { jobActionButtons } from './job_actions.js';
import { feedback, fillPager, pageCount, scrollRegion } from './widgets.js';
import { href, navigate, rememberJobList } from './router.js';

export const tabs = /** @type {const} */ ([
  ['all', 'All'], ['pending', 'Pending'], ['active', 'Active'], ['completed', 'Completed'],
  ['failed', 'Failed'], ['dead', 'Dead'], ['cancelled', 'Cancelled'],
]);

const columns = ['Type', 'Status', 'Certificate', 'Triggered By', 'Attempts', 'Progress', 'Created', 'Duration', 'Error', 'Actions'];

/** @param {string} s */
export function isJobId(s) { return /^[0-9a-f]{24}$/.test(s); }

/**
 * The job id in what an operator pasted into Go to Job ID…: the id itself (spaces around it and
 * upper case allowed), or a job page's or the API's URL that names one (…/jobs/<id>…). Issue 31:
 * the box cut a pasted id at 24 characters before it was trimmed.
 * @param {string} text @returns {string}
 */
export function jobIdFrom(text) {
  const t = text.trim().toLowerCase();
  if (isJobId(t)) return t;
  const inUrl = /\/jobs\/([0-9a-f]{24})(?:[/?#]|$)/.exec(t);
  return inUrl ? inUrl[1] : t;
}

/** @param {import('./router.js').PageContext} ctx @returns {import('./router.js').PageHandle} */
export function renderJobs(ctx) {
  const { project, query } = ctx;
  const status = tabs.some(([k]) => k === query.get('status')) ? /** @type {string} */ (query.get('status')) : 'all';
  const type = query.get('type') ?? '';
  const page = Math.max(1, Number.parseInt(query.get('page') ?? '1', 10) || 1);
  rememberJobList(href('/jobs', { project, status: status === 'all' ? null : status, type: type || null, page: page > 1 ? page : null }));
  const fb = feedback();
  let disposed = false;
  /** @type {ReturnType<typeof setInterval> | null} */
  let timer = null;

  const badge = h('span', { class: 'badge live', id: 'auto-refresh', text: 'Auto-refreshing' });
  const gotoInput = h('input', {
    id: 'goto-job', type: 'search', placeholder: 'Go to Job ID…', 'aria-label': 'Go to Job ID…',
    autocomplete: 'off', spellcheck: 'false', maxlength: '2048',
  });
  const gotoMsg = h('span', { class: 'goto-msg', id: 'goto-msg', role: 'status', 'aria-live': 'polite' });
  const gotoForm = h('form', { class: 'goto', role: 'search' }, gotoInput,
    h('button', { type: 'submit', text: 'Go' }), gotoMsg);
  gotoForm.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const id = jobIdFrom(gotoInput.value);
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
      h('td', { class: 'type-cell', 'data-label': 'Type' }, h('a', { href: detail, class: 'job-link', text: fmt.typeLabel(job.type) }), ' ',
        kind ? h('span', { class: 'tag child', text: 'child', title: kind === 'batch' ? 'batch child of a fan-out run' : 'retry child of a fan-out run' }) : null),
      h('td', { 'data-label': 'Status' }, fmt.statusTag(fmt.shownStatus(job))),
      h('td', { 'data-label': 'Certificate' }, cert),
      h('td', { 'data-label': 'Triggered By', text: fmt.triggeredBy(job) }),
      h('td', { class: 'num', 'data-label': 'Attempts', text: `${job.attempts} / ${job.max_attempts}` }),
      h('td', { 'data-label': 'Progress' }, fmt.progress(job.progress, `Progress of job ${job.id}`, job.status === 'failed' || job.status === 'dead')),
      h('td', { 'data-label': 'Created' }, fmt.timeEl(job.created_at)),
      h('td', { class: 'num', 'data-label': 'Duration', text: fmt.isLive(job) ? '' : fmt.duration(job) }),
      h('td', { class: 'error-cell', 'data-label': 'Error' }, err ? h('span', { class: 'tag error-tag', title: err, text: err }) : ''),
      h('td', { class: 'actions', 'data-label': 'Actions' }, ...jobActionButtons(job, project, fb, () => { void load(false, job.id); })));
    tr.addEventListener('click', (ev) => {
      if (ev.target instanceof Element && ev.target.closest('a, button')) return;
      navigate(detail);
    });
    return tr;
  }

  // Rows stay where they are while the pointer or the focus is in the table (issue 31: a pointer
  // resting on Cancel belonged to another job one refresh later). An automatic refresh then
  // only updates the counts and says what changed; the rows follow on "show" or once the
  // pointer and focus have left.
  const wrap = scrollRegion('Jobs table', table);
  let pointerIn = false;
  /** @type {{items: any[], certs: Map<string, string>, pages: number} | null} */
  let held = null;
  const heldNote = h('div', { class: 'held-note', id: 'held-note', role: 'status', 'aria-live': 'polite' });
  const holding = () => pointerIn || wrap.contains(document.activeElement);
  wrap.addEventListener('pointerenter', () => { pointerIn = true; });
  wrap.addEventListener('pointerleave', () => { pointerIn = false; releaseHeld(); });
  wrap.addEventListener('focusout', () => { setTimeout(releaseHeld, 0); });
  function releaseHeld() {
    if (!held || holding() || disposed) return;
    const h0 = held;
    held = null;
    drawRows(h0.items, h0.certs, h0.pages);
  }

  /** The focused row's job and action, to give the focus back after the rows are redrawn. */
  function focusedSpot() {
    const a = document.activeElement;
    if (!(a instanceof HTMLElement) || !tbody.contains(a)) return null;
    const tr = a.closest('tr[data-job-id]');
    return tr ? { id: tr.getAttribute('data-job-id'), action: a.getAttribute('data-action') } : null;
  }
  /** @param {{id: string | null, action: string | null} | null} spot */
  function restoreFocus(spot) {
    if (!spot) return;
    const tr = tbody.querySelector(`tr[data-job-id="${spot.id}"]`);
    /** @type {HTMLElement | null} */
    const target = (spot.action && tr?.querySelector(`[data-action="${spot.action}"]`)) || tr?.querySelector('a.job-link') || null;
    if (target instanceof HTMLElement) target.focus({ preventScroll: true });
    else wrap.focus({ preventScroll: true });
  }

  /**
   * @param {any[]} items @param {Map<string, string>} certs @param {number} pages
   * @param {string} [actedOn] the job a Retry/Cancel just acted on: its button was disabled
   *   while the request ran, which drops the focus, so it goes back to that job's row.
   */
  function drawRows(items, certs, pages, actedOn) {
    const spot = focusedSpot() ?? (actedOn && document.activeElement === document.body ? { id: actedOn, action: null } : null);
    heldNote.replaceChildren();
    replace(tbody, ...items.map((/** @type {any} */ j) => row(j, certs)));
    state.textContent = items.length ? '' : 'No jobs here.';
    if (fillPager(pager, page, pages, (n) => href('/jobs', { project, status: status === 'all' ? null : status, type: type || null, page: n }))) return;
    restoreFocus(spot);
  }

  /** @param {string} text @param {string} cls */
  function setBadge(text, cls) { badge.textContent = text; badge.className = `badge ${cls}`; }
  let unreachable = false;

  /**
   * @param {boolean} [auto] an automatic refresh (held while the operator is in the table)
   * @param {string} [actedOn] the job an action just acted on (see drawRows)
   */
  async function load(auto = false, actedOn = undefined) {
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
      // The server answered: whatever said it could not be reached is over (issue 31).
      if (unreachable) {
        unreachable = false;
        fb.clear();
        schedule();
      }
      renderTabs(r.counts);
      const items = Array.isArray(r.items) ? r.items : [];
      const pages = pageCount(r);
      if (auto && holding() && tbody.childElementCount > 0) {
        const shownIds = new Set([...tbody.querySelectorAll('tr[data-job-id]')].map((tr) => tr.getAttribute('data-job-id')));
        const changed = items.length !== shownIds.size || items.some((/** @type {any} */ j) => {
          const tr = tbody.querySelector(`tr[data-job-id="${j.id}"]`);
          return !tr || tr.getAttribute('data-status') !== j.status;
        });
        if (!changed) return;
        held = { items, certs, pages };
        const fresh = items.filter((/** @type {any} */ j) => !shownIds.has(j.id)).length;
        const show = h('button', { type: 'button', class: 'link-button', id: 'show-held', text: 'show' });
        show.addEventListener('click', () => {
          const h0 = held;
          held = null;
          if (h0) drawRows(h0.items, h0.certs, h0.pages);
          wrap.focus({ preventScroll: true });  // "show" itself is gone with the note
        });
        replace(heldNote, fresh ? `${fresh} new job${fresh === 1 ? '' : 's'} — ` : 'Jobs on this page changed — ', show);
        return;
      }
      held = null;
      drawRows(items, certs, pages, actedOn);
    } catch (e) {
      if (disposed) return;
      state.textContent = '';
      if (e instanceof api.ApiError && e.status === 0) {
        unreachable = true;
        if (timer) clearInterval(timer);
        timer = setInterval(() => { void load(true); }, 10000);
        setBadge('Server unreachable: retrying every 10 s', 'offline');
      }
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
    if (unreachable) return;
    setBadge('Auto-refreshing', 'live');
    timer = setInterval(() => { void load(true); }, 10000);
  }
  const onVisibility = () => { schedule(); if (!document.hidden) void load(true); };
  document.addEventListener('visibilitychange', onVisibility);

  replace(ctx.root,
    h('div', { class: 'page-head' }, h('h1', { text: 'Job Queue' }), badge,
      h('div', { class: 'page-tools' }, gotoForm, refreshBtn)),
    fb.el, tabNav, typeNote, heldNote, wrap, state, pager);
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
