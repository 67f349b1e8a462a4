// A distribution: status, run, the progress bar with Total/Succeeded/Failed/Partial/Cancelled,
// the retry wave, the finalized child jobs, per-target results (paged, filterable by status and
// error class), the per-target × wave grid, and Execute / Retry failed / Cancel / Rollback.
import * as api from './api.js';
import { allPages, certificateNames } from './catalog.js';
import { h, pagerLinks, replace, showAlert } from './dom.js';
import * as fmt from './format.js';
import { feedback } from './job_actions.js';
import { href, setQuery } from './router.js';
import * as session from './session.js';

const RESULTS_PAGE = 50;
const resultStatuses = ['succeeded', 'failed', 'skipped', 'cancelled', 'pending'];

/**
 * @param {string} name
 * @param {string} label
 * @param {number | string | undefined} value
 */
function counter(name, label, value) {
  return h('div', { class: `counter counter-${name}`, 'data-counter': name },
    h('span', { class: 'counter-value', text: value === undefined ? '–' : String(value) }),
    h('span', { class: 'counter-label', text: label }));
}

/** @param {import('./router.js').PageContext} ctx @returns {import('./router.js').PageHandle} */
export function renderDistributionDetail(ctx) {
  const { project, query } = ctx;
  const id = ctx.params.id;
  const statusFilter = query.get('status') ?? '';
  const classFilter = query.get('error_class') ?? '';
  const rpage = Math.max(1, Number.parseInt(query.get('page') ?? '1', 10) || 1);
  const fb = feedback();
  let disposed = false;
  /** @type {ReturnType<typeof setTimeout> | null} */
  let timer = null;

  const title = h('h1', { text: 'Distribution' });
  const statusEl = h('div', { class: 'dist-status' });
  const actions = h('div', { class: 'page-tools' });
  const overview = h('section', { class: 'card', 'aria-labelledby': 'dist-progress-title' });
  const children = h('section', { class: 'card', 'aria-labelledby': 'children-title' });
  const results = h('section', { class: 'card', 'aria-labelledby': 'results-title' });
  const grid = h('section', { class: 'card', 'aria-labelledby': 'grid-title' });
  const state = h('p', { class: 'muted', role: 'status', text: 'Loading…' });
  replace(ctx.root,
    h('p', null, h('a', { class: 'back', href: href('/distributions', { project }), text: '← Back' })),
    h('div', { class: 'page-head' }, title, statusEl, actions),
    fb.el, state, overview, children, results, grid);

  /** @param {string} label @param {string} path @param {unknown} [body] */
  function actionButton(label, path, body) {
    const b = h('button', { type: 'button', class: 'action', text: label });
    b.addEventListener('click', async () => {
      b.disabled = true;
      try {
        const r = await api.post(api.projectPath(project, `/distributions/${id}/${path}`), body);
        const rb = r.body ?? {};
        fb.ok(path === 'cancel'
          ? `Cancel requested: ${rb.cancelled_jobs ?? 0} jobs cancelled, ${rb.stop_requested_jobs ?? 0} asked to stop`
          : `${label}: run ${rb.run_no ?? '?'} started (${rb.mode ?? ''}${Array.isArray(rb.job_ids) ? `, ${rb.job_ids.length} jobs` : ''})`);
      } catch (e) {
        fb.fail(api.errorText(e));
      } finally {
        b.disabled = false;
        void load();
      }
    });
    return b;
  }

  /**
   * @param {any} d @param {Map<string, string>} certs @param {any[]} items
   * @param {Map<string, string>} targets id -> name
   */
  function draw(d, certs, items, targets) {
    /** @param {string} tid */
    const targetName = (tid) => targets.get(tid) ?? tid;
    title.textContent = d.name ?? 'Distribution';
    replace(statusEl, fmt.outcomeTag(String(d.status)), h('span', { class: 'run-no', text: `Run ${d.run_no ?? 0}` }),
      d.mode ? h('span', { class: 'muted', text: d.mode }) : null);
    replace(actions, ...(session.canOperate() ? [
      actionButton('Execute', 'execute'), actionButton('Retry failed', 'retry-failed'),
      actionButton('Cancel', 'cancel'), actionButton('Rollback', 'rollback'),
    ] : []));

    const f = d.fan_out;
    const s = d.summary;
    // The bar: the run's targets with an outcome, of all its targets (red once one failed).
    const total = s?.targets ?? 0;
    const done = s ? total - (s.pending ?? 0) : 0;
    replace(overview, h('h2', { id: 'dist-progress-title', text: 'Progress' }),
      total > 0 ? h('p', { class: 'progress-line' }, h('progress', { value: Math.min(done, total), max: total, 'aria-label': 'Distribution progress', class: s?.failed ? 'failed' : null }),
        h('span', { class: 'progress-text', text: ` ${done} of ${total} targets done` })) : null,
      f ? h('h3', { class: 'counter-group', text: 'Child jobs' }) : null,
      f ? h('div', { class: 'counters', id: 'fanout-counters' },
        counter('total', 'Total', f.total), counter('succeeded', 'Succeeded', f.succeeded), counter('failed', 'Failed', f.failed),
        counter('partial', 'Partial', f.partial), counter('cancelled', 'Cancelled', f.cancelled),
        counter('retrying', 'Retrying', f.retrying), counter('retry_wave', 'Retry wave', f.retry_wave)) : null,
      s ? h('h3', { class: 'counter-group', text: 'Targets' }) : null,
      s ? h('div', { class: 'counters', id: 'target-counters' },
        counter('targets', 'Targets', s.targets), counter('t_succeeded', 'Succeeded', s.succeeded), counter('t_failed', 'Failed', s.failed),
        counter('t_skipped', 'Skipped', s.skipped), counter('t_cancelled', 'Cancelled', s.cancelled), counter('t_pending', 'Pending', s.pending)) : null,
      h('dl', { class: 'summary' },
        h('dt', { text: 'Certificate' }), h('dd', null, d.certificate_id ? h('a', { href: href(`/certificates/${d.certificate_id}`, { project }), text: certs.get(d.certificate_id) ?? d.certificate_id }) : '—'),
        h('dt', { text: 'Targets' }), h('dd', { text: String(Array.isArray(d.target_ids) ? d.target_ids.length : 0) }),
        h('dt', { text: 'Run started' }), h('dd', null, fmt.timeEl(d.run_started_at) || '—'),
        h('dt', { text: 'Run finished' }), h('dd', null, fmt.timeEl(d.run_finished_at) || '—'),
        d.error ? [h('dt', { text: 'Error' }), h('dd', { class: 'error-text', text: d.error })] : null));

    const fin = Array.isArray(f?.finalized_jobs) ? f.finalized_jobs : [];
    const jobIds = Array.isArray(d.job_ids) ? d.job_ids : [];
    replace(children, h('h2', { id: 'children-title', text: f ? 'Finalized child jobs' : 'Jobs of this run' }),
      f ? (fin.length ? h('ul', { class: 'child-list' }, ...fin.map((/** @type {any} */ c) => h('li', null,
        h('a', { href: href(`/jobs/${c.job_id}`, { project }), text: c.job_id }), ' ',
        h('span', { class: 'tag child', text: c.kind }), ' ', fmt.outcomeTag(String(c.outcome))))) : h('p', { class: 'muted', text: 'No child has finished yet.' }))
        : (jobIds.length ? h('ul', { class: 'child-list' }, ...jobIds.map((/** @type {string} */ j) => h('li', null, h('a', { href: href(`/jobs/${j}`, { project }), text: j }))))
          : h('p', { class: 'muted', text: 'Not run yet.' })));

    // Results: all of the run's, filtered and paged here (the route has no filters).
    const classes = [...new Set(items.map((r) => r.error_class).filter(Boolean))].sort();
    const filtered = items.filter((r) => (!statusFilter || r.status === statusFilter) && (!classFilter || r.error_class === classFilter));
    const pages = Math.max(1, Math.ceil(filtered.length / RESULTS_PAGE));
    const pageItems = filtered.slice((rpage - 1) * RESULTS_PAGE, rpage * RESULTS_PAGE);
    const statusSel = h('select', { id: 'results-status', 'aria-label': 'Filter by status' },
      h('option', { value: '', text: 'All statuses' }), ...resultStatuses.map((x) => h('option', { value: x, text: x, selected: x === statusFilter })));
    const classSel = h('select', { id: 'results-class', 'aria-label': 'Filter by error class' },
      h('option', { value: '', text: 'All error classes' }), ...classes.map((x) => h('option', { value: x, text: x, selected: x === classFilter })));
    statusSel.addEventListener('change', () => setQuery({ status: statusSel.value, page: null }));
    classSel.addEventListener('change', () => setQuery({ error_class: classSel.value, page: null }));
    /** @param {number} p */
    const pageLink = (p) => href(`/distributions/${id}`, { project, status: statusFilter || null, error_class: classFilter || null, page: p });
    replace(results, h('div', { class: 'card-head' }, h('h2', { id: 'results-title', text: 'Target results' }),
      h('div', { class: 'card-tools' }, statusSel, classSel)),
    h('div', { class: 'table-wrap' }, h('table', { id: 'results-table' },
      h('caption', { class: 'visually-hidden', text: 'Per-target results' }),
      h('thead', null, h('tr', null, ...['Target', 'Status', 'Error class', 'Error', 'Retry wave', 'Job', 'Finished'].map((c) => h('th', { scope: 'col', text: c })))),
      h('tbody', null, ...pageItems.map((r) => h('tr', null,
        h('td', null, h('span', { title: r.target_id, text: targetName(r.target_id) })), h('td', null, fmt.outcomeTag(String(r.status))),
        h('td', { text: r.error_class ?? '' }), h('td', { class: 'error-cell' }, r.error ? h('span', { class: 'tag error-tag', title: r.error, text: r.error }) : ''),
        h('td', { class: 'num', text: String(r.retry_attempt ?? 0) }),
        h('td', null, r.job_id ? h('a', { href: href(`/jobs/${r.job_id}`, { project }), text: `${String(r.job_id).slice(0, 8)}…`, title: `Job ${r.job_id}` }) : ''),
        h('td', null, fmt.timeEl(r.finished_at))))))),
    h('p', { class: 'muted', text: filtered.length ? `${filtered.length} of ${items.length} targets` : (items.length ? 'No target matches the filter.' : 'No results yet.') }),
    pages > 1 ? h('nav', { class: 'pager', 'aria-label': 'Result pages' },
      ...pagerLinks(rpage, pages, pageLink)) : null);

    // The per-target × wave grid: a target that reached wave k failed in the waves before it.
    const waves = Math.max(Number(f?.retry_wave ?? 0), ...pageItems.map((r) => Number(r.retry_attempt ?? 0)), 0);
    replace(grid, h('h2', { id: 'grid-title', text: 'Targets × waves' }),
      pageItems.length ? h('div', { class: 'table-wrap' }, h('table', { class: 'wave-grid' },
        h('caption', { class: 'visually-hidden', text: 'Outcome of each target in each wave' }),
        h('thead', null, h('tr', null, h('th', { scope: 'col', text: 'Target' }),
          ...Array.from({ length: waves + 1 }, (_, w) => h('th', { scope: 'col', text: w === 0 ? 'Wave 0' : `Retry wave ${w}` })))),
        h('tbody', null, ...pageItems.map((r) => h('tr', null, h('th', { scope: 'row', title: r.target_id, text: targetName(r.target_id) }),
          ...Array.from({ length: waves + 1 }, (_, w) => {
            const ra = Number(r.retry_attempt ?? 0);
            const st = w < ra ? 'failed' : w === ra ? String(r.status) : '';
            return h('td', { class: st ? `cell outcome-${st}` : 'cell' }, st ? h('span', { class: 'cell-text', text: st }) : '');
          })))))) : h('p', { class: 'muted', text: 'No results yet.' }));
  }

  async function load() {
    if (timer) { clearTimeout(timer); timer = null; }
    try {
      const [d, certs] = await Promise.all([api.get(api.projectPath(project, `/distributions/${id}`)), certificateNames(project)]);
      const [items, targetList] = await Promise.all([
        d.run_no > 0 ? allPages(api.projectPath(project, `/distributions/${id}/results?run=${d.run_no}`), 10000) : Promise.resolve([]),
        allPages(api.projectPath(project, '/targets'), 10000).catch(() => []),
      ]);
      if (disposed) return;
      state.hidden = true;
      draw(d, certs, items, new Map(targetList.map((t) => [String(t.id), String(t.name)])));
      if (d.status === 'running') timer = setTimeout(() => { void load(); }, 2000);
    } catch (e) {
      if (!disposed) showAlert(state, api.errorText(e));
    }
  }
  void load();
  return { refresh() { void load(); }, dispose() { disposed = true; if (timer) clearTimeout(timer); } };
}
