// A distribution: status, run, the progress bar, the child-job counters (batches and retry-wave
// jobs apart), the retry wave, the long tail (per-phase percentiles and the slowest targets), the
// finalized child jobs, per-target results (paged and filtered by status and error class on the
// server), the per-target × wave grid, and Execute / Retry failed / Cancel / Rollback.
import * as api from './api.js';
import { allPages, certificateNames } from './catalog.js';
import { h, replace, showAlert, svg } from './dom.js';
import * as fmt from './format.js';
import { confirmAction, feedback, pagerLinks, scrollRegion } from './widgets.js';
import { href, setQuery } from './router.js';
import * as session from './session.js';

const RESULTS_PAGE = 50;

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

/**
 * Milliseconds as operators read them: "850 ms", "2.4 s", "61 s".
 * @param {number | undefined} ms
 */
function msText(ms) {
  const n = Number(ms ?? 0);
  if (n < 1000) return `${n} ms`;
  return `${(n / 1000).toFixed(n < 10000 ? 1 : 0)} s`;
}

const barPhases = new Set(['connect', 'handshake', 'auth', 'upload', 'install', 'validate']);

/**
 * "connect 3 ms · handshake 21 ms · …", every phase the target timed, in order.
 * @param {Record<string, number> | undefined} timings
 */
function phaseText(timings) {
  return Object.entries(timings ?? {}).map(([k, v]) => `${k} ${msText(v)}`).join(' · ');
}

/**
 * One target's time as a bar: its wait for a session, then each phase, to the scale of the
 * longest. SVG rects take their size as attributes (the CSP allows no style).
 * @param {any} t a long_tail.slowest entry @param {number} longest ms
 */
function phaseBar(t, longest) {
  const width = 240;
  const bar = svg('svg', { width, height: 12, viewBox: `0 0 ${width} 12`, class: 'phase-bar', role: 'img',
    'aria-label': `${msText(t.total_ms)}${t.session_wait_ms ? ` after waiting ${msText(t.session_wait_ms)} for a session` : ''}` });
  let x = 0;
  /** @param {string} kind @param {number} ms */
  const add = (kind, ms) => {
    const w = (ms / longest) * width;
    if (w <= 0) return;
    bar.append(svg('rect', { x: x.toFixed(2), y: 0, width: Math.max(w, 0.5).toFixed(2), height: 12, class: `phase phase-${kind}` }));
    x += w;
  };
  add('wait', Number(t.session_wait_ms ?? 0));
  for (const [k, v] of Object.entries(t.timings_ms ?? {})) add(barPhases.has(k) ? k : 'other', Number(v));
  return bar;
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
  const tail = h('section', { class: 'card', 'aria-labelledby': 'tail-title' });
  const children = h('section', { class: 'card', 'aria-labelledby': 'children-title' });
  const results = h('section', { class: 'card', 'aria-labelledby': 'results-title' });
  const grid = h('section', { class: 'card', 'aria-labelledby': 'grid-title' });
  const state = h('p', { class: 'muted', role: 'status', text: 'Loading…' });
  replace(ctx.root,
    h('p', null, h('a', { class: 'back', href: href('/distributions', { project }), text: '← Back' })),
    h('div', { class: 'page-head' }, title, statusEl, actions),
    fb.el, state, overview, tail, children, results, grid);

  /** @param {string} label @param {string} path @param {unknown} [body] */
  function actionButton(label, path, body) {
    const b = h('button', { type: 'button', class: 'action', text: label });
    b.addEventListener('click', async () => {
      // Cancel and Rollback cannot be undone: the dialog names the distribution (issue 31).
      const name = title.textContent ?? id;
      if (path === 'cancel' && !await confirmAction({
        title: `Cancel the run of ${name}?`,
        text: `The running run of distribution ${name} stops: its pending jobs are cancelled and its active ones asked to stop. Targets already done keep their certificate. This cannot be undone.`,
        confirm: 'Cancel run', keep: 'Keep running',
      })) return;
      if (path === 'rollback' && !await confirmAction({
        title: `Roll back ${name}?`,
        text: `A rollback run of distribution ${name} puts back, on every target its last run delivered to, the files from before that run, and runs their post-deploy commands. It cannot be undone; a later Execute delivers the current certificate again.`,
        confirm: 'Roll back', keep: 'Keep current',
      })) return;
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
   * @param {any} d @param {Map<string, string>} certs @param {any} res the results route's answer
   * @param {Map<string, string>} targets id -> name
   */
  function draw(d, certs, res, targets) {
    /** @param {string} tid */
    const targetName = (tid) => targets.get(tid) ?? tid;
    title.textContent = d.name ?? 'Distribution';
    replace(statusEl, fmt.outcomeTag(String(d.status)), h('span', { class: 'run-no', text: `Run ${d.run_no ?? 0}` }),
      d.mode ? h('span', { class: 'muted', text: d.mode }) : null);
    // Only what can succeed now (issue 31): Cancel while a run runs; Execute, Retry failed (when
    // the last run left failed targets) and Rollback (once a run happened) when none does.
    const running = d.status === 'running';
    /** @type {HTMLButtonElement[]} */
    const buttons = [];
    if (session.canOperate()) {
      if (!running) buttons.push(actionButton('Execute', 'execute'));
      if (!running && (d.status === 'partial' || d.status === 'failed')) buttons.push(actionButton('Retry failed', 'retry-failed'));
      if (running) buttons.push(actionButton('Cancel', 'cancel'));
      if (!running && Number(d.run_no) > 0) buttons.push(actionButton('Rollback', 'rollback'));
    }
    replace(actions, ...buttons);

    const f = d.fan_out;
    const s = d.summary;
    // The bar: the run's targets with an outcome, of all its targets (red once one failed).
    const total = s?.targets ?? 0;
    const done = s ? total - (s.pending ?? 0) : 0;
    replace(overview, h('h2', { id: 'dist-progress-title', text: 'Progress' }),
      total > 0 ? h('p', { class: 'progress-line' }, h('progress', { value: Math.min(done, total), max: total, 'aria-label': 'Distribution progress', class: s?.failed ? 'failed' : null }),
        h('span', { class: 'progress-text', text: ` ${done} of ${total} targets done` })) : null,
      ...(f ? childCounters(f) : []),
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

    drawTail(d.long_tail, targetName);

    // Results: one page, filtered by the route; the menus list what the run has (facets).
    /** @type {any[]} */
    const pageItems = Array.isArray(res?.items) ? res.items : [];
    const matching = Number(res?.total ?? 0);
    const all = Number(res?.targets ?? 0);
    const pages = Math.max(1, Math.ceil(matching / RESULTS_PAGE));
    /** @type {Record<string, number>} */
    const statusCounts = res?.facets?.status ?? {};
    /** @type {Record<string, number>} */
    const classCounts = res?.facets?.error_class ?? {};
    if (classFilter && !(classFilter in classCounts)) classCounts[classFilter] = 0;
    const statusSel = h('select', { id: 'results-status', 'aria-label': 'Filter by status' },
      h('option', { value: '', text: 'All statuses' }),
      ...Object.entries(statusCounts).map(([x, n]) => h('option', { value: x, text: `${x} (${n})`, selected: x === statusFilter })));
    const classSel = h('select', { id: 'results-class', 'aria-label': 'Filter by error class' },
      h('option', { value: '', text: 'All error classes' }),
      ...Object.entries(classCounts).sort().map(([x, n]) => h('option', { value: x, text: `${x} (${n})`, selected: x === classFilter })));
    statusSel.addEventListener('change', () => setQuery({ status: statusSel.value, page: null }));
    classSel.addEventListener('change', () => setQuery({ error_class: classSel.value, page: null }));
    /** @param {number} p */
    const pageLink = (p) => href(`/distributions/${id}`, { project, status: statusFilter || null, error_class: classFilter || null, page: p });
    // Issue 31: a failed or cancelled target of the run that ended runs again in that run.
    const redrive = session.canOperate() && !running && d.status !== 'idle' && d.mode !== 'rollback' && Number(d.run_no) > 0;
    /** @param {any} r */
    const retryCell = (r) => {
      if (r.status !== 'failed' && r.status !== 'cancelled') return h('td', null);
      const b = h('button', { type: 'button', class: 'action', 'data-action': 'retry-target', text: 'Retry',
        'aria-label': `Retry target ${targetName(r.target_id)} in run ${d.run_no}` });
      b.addEventListener('click', async () => {
        b.disabled = true;
        try {
          const a = await api.post(api.projectPath(project, `/distributions/${id}/retry-targets`), { target_ids: [r.target_id] });
          fb.ok(`Target ${targetName(r.target_id)} runs again in run ${a.body?.run_no ?? '?'} as `,
            h('a', { href: href(`/jobs/${a.body?.job_id}`, { project }), text: `job ${a.body?.job_id}` }));
        } catch (e) {
          fb.fail(api.errorText(e));
        } finally {
          b.disabled = false;
          void load();
        }
      });
      return h('td', { class: 'actions', 'data-label': 'Actions' }, b);
    };
    const columns = ['Target', 'Status', 'Error class', 'Error', 'Retry wave', 'Job', 'Finished', ...(redrive ? ['Actions'] : [])];
    replace(results, h('div', { class: 'card-head' }, h('h2', { id: 'results-title', text: 'Target results' }),
      h('div', { class: 'card-tools' }, statusSel, classSel)),
    // At phone width each row is a card (table.phone-cards): the Retry button stays in view.
    scrollRegion('Target results table', h('table', { id: 'results-table', class: 'phone-cards' },
      h('caption', { class: 'visually-hidden', text: 'Per-target results' }),
      h('thead', null, h('tr', null, ...columns.map((c) => h('th', { scope: 'col', text: c })))),
      h('tbody', null, ...pageItems.map((r) => h('tr', null,
        h('td', { 'data-label': 'Target' }, h('span', { title: r.target_id, text: targetName(r.target_id) })), h('td', { 'data-label': 'Status' }, fmt.outcomeTag(String(r.status))),
        h('td', { 'data-label': 'Error class', text: r.error_class ?? '' }), h('td', { class: 'error-cell', 'data-label': 'Error' }, r.error ? h('span', { class: 'tag error-tag', title: r.error, text: r.error }) : ''),
        h('td', { class: 'num', 'data-label': 'Retry wave', text: String(r.retry_attempt ?? 0) }),
        h('td', { 'data-label': 'Job' }, r.job_id ? h('a', { href: href(`/jobs/${r.job_id}`, { project }), text: `${String(r.job_id).slice(0, 8)}…`, title: `Job ${r.job_id}` }) : ''),
        h('td', { 'data-label': 'Finished' }, fmt.timeEl(r.finished_at)), redrive ? retryCell(r) : null))))),
    h('p', { class: 'muted', id: 'results-count', text: matching ? `${matching} of ${all} targets` : (all ? 'No target matches the filter.' : 'No results yet.') }),
    pages > 1 ? h('nav', { class: 'pager', 'aria-label': 'Result pages' },
      ...pagerLinks(rpage, pages, pageLink)) : null);

    // The per-target × wave grid: a target that reached wave k failed in the waves before it.
    const waves = Math.max(Number(f?.retry_wave ?? 0), ...pageItems.map((r) => Number(r.retry_attempt ?? 0)), 0);
    replace(grid, h('h2', { id: 'grid-title', text: 'Targets × waves' }),
      pageItems.length ? scrollRegion('Targets by wave', h('table', { class: 'wave-grid' },
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

  /**
   * The child-job counters: the batches the run was cut into, and the retry-wave jobs their
   * transient failures went to, apart (the API's fan_out counters count both kinds together).
   * @param {any} f the distribution's fan_out
   */
  function childCounters(f) {
    const b = f.batches ?? {};
    const r = f.retry_jobs ?? {};
    return [
      h('h3', { class: 'counter-group', text: 'Batches' }),
      h('p', { class: 'counter-note muted', text: 'The child jobs the run\'s targets were split into.' }),
      h('div', { class: 'counters', id: 'batch-counters' },
        counter('batches', 'Batches', b.total), counter('b_succeeded', 'Succeeded', b.succeeded), counter('b_failed', 'Failed', b.failed),
        counter('b_partial', 'Partial', b.partial), counter('b_cancelled', 'Cancelled', b.cancelled),
        counter('b_unfinished', 'Not finished', b.total === undefined ? undefined : Number(b.total) - Number(b.finished ?? 0))),
      h('h3', { class: 'counter-group', text: 'Retry-wave jobs' }),
      h('p', { class: 'counter-note muted', text: 'A batch\'s transient failures are retried in separate jobs, counted here, not among the batches.' }),
      h('div', { class: 'counters', id: 'retry-counters' },
        counter('retry_jobs', 'Retry jobs', r.finished === undefined ? undefined : Number(r.finished) + Number(r.running ?? 0)),
        counter('r_succeeded', 'Succeeded', r.succeeded), counter('r_failed', 'Failed', r.failed),
        counter('r_partial', 'Partial', r.partial), counter('r_cancelled', 'Cancelled', r.cancelled),
        counter('retrying', 'Running', f.retrying), counter('retry_wave', 'Highest wave', f.retry_wave)),
    ];
  }

  /**
   * The long tail: how each phase spreads over the run, and the slowest targets with their phases.
   * @param {any} lt the distribution's long_tail
   * @param {(tid: string) => string} targetName
   */
  function drawTail(lt, targetName) {
    /** @type {any[]} */
    const phases = Array.isArray(lt?.phases) ? lt.phases : [];
    /** @type {any[]} */
    const slowest = Array.isArray(lt?.slowest) ? lt.slowest : [];
    if (!lt || !lt.timed_targets) {
      replace(tail, h('h2', { id: 'tail-title', text: 'Long tail' }), h('p', { class: 'muted', text: 'No timed target yet.' }));
      return;
    }
    const longest = Math.max(1, ...slowest.map((t) => Number(t.total_ms ?? 0) + Number(t.session_wait_ms ?? 0)));
    const phaseTable = h('table', { id: 'tail-phases' },
      h('caption', { class: 'visually-hidden', text: 'Percentiles of each delivery phase over the run' }),
      h('thead', null, h('tr', null, ...['Phase', 'Targets', 'p50', 'p90', 'p99', 'Max'].map((c, i) => h('th', { scope: 'col', class: i ? 'num' : null, text: c })))),
      h('tbody', null, ...phases.map((p) => h('tr', { 'data-phase': p.phase },
        h('th', { scope: 'row', text: String(p.phase) }), h('td', { class: 'num', 'data-label': 'Targets', text: String(p.count) }),
        ...[['p50_ms', 'p50'], ['p90_ms', 'p90'], ['p99_ms', 'p99'], ['max_ms', 'Max']].map(([k, label]) =>
          h('td', { class: 'num', 'data-stat': k, 'data-label': label, text: p.count ? msText(p[k]) : '–' }))))));
    const slowTable = h('table', { id: 'tail-slowest' },
      h('caption', { class: 'visually-hidden', text: 'The slowest targets of the run and where their time went' }),
      h('thead', null, h('tr', null, ...['Target', 'Status', 'Total', 'Waited for a session', 'Phases'].map((c, i) => h('th', { scope: 'col', class: i === 2 || i === 3 ? 'num' : null, text: c })))),
      h('tbody', null, ...slowest.map((t) => h('tr', { 'data-target-id': t.target_id },
        h('td', { 'data-label': 'Target' }, h('span', { title: t.target_id, text: targetName(String(t.target_id)) })),
        h('td', { 'data-label': 'Status' }, fmt.outcomeTag(String(t.status))),
        h('td', { class: 'num', 'data-label': 'Total', text: msText(t.total_ms) }),
        h('td', { class: 'num', 'data-label': 'Waited', text: t.session_wait_ms ? msText(t.session_wait_ms) : '–' }),
        h('td', { class: 'phase-cell', 'data-label': 'Phases' }, phaseBar(t, longest), h('span', { class: 'phase-text', text: phaseText(t.timings_ms) }))))));
    // The legend's squares: an SVG rect each (a size attribute, no style).
    const legend = h('p', { class: 'phase-legend muted' }, ...['wait', 'connect', 'handshake', 'auth', 'upload', 'install', 'validate', 'other'].map((k) => {
      const square = svg('svg', { width: 10, height: 10, 'aria-hidden': 'true', class: `phase phase-${k}` });
      square.append(svg('rect', { width: 10, height: 10 }));
      return h('span', { class: 'legend-item' }, square, ` ${k === 'wait' ? 'session wait' : k}`);
    }));
    replace(tail, h('h2', { id: 'tail-title', text: 'Long tail' }),
      h('p', { class: 'muted', text: `Phase times over the run's ${lt.timed_targets} timed targets. A target that reused a connection has no connect, handshake or auth time; a wait for a session is not part of a target's own time.` }),
      scrollRegion('Phases', phaseTable),
      h('h3', { class: 'counter-group', text: `The ${slowest.length} slowest targets` }),
      scrollRegion('Slowest targets', slowTable),
      legend);
  }

  async function load() {
    if (timer) { clearTimeout(timer); timer = null; }
    try {
      const [d, certs] = await Promise.all([api.get(api.projectPath(project, `/distributions/${id}`)), certificateNames(project)]);
      const q = new URLSearchParams({ run: String(d.run_no), page: String(rpage), page_size: String(RESULTS_PAGE) });
      if (statusFilter) q.set('status', statusFilter);
      if (classFilter) q.set('error_class', classFilter);
      const [res, targetList] = await Promise.all([
        d.run_no > 0 ? api.get(api.projectPath(project, `/distributions/${id}/results?${q}`)) : Promise.resolve(null),
        allPages(api.projectPath(project, '/targets'), 10000).catch(() => []),
      ]);
      if (disposed) return;
      state.hidden = true;
      draw(d, certs, res, new Map(targetList.map((t) => [String(t.id), String(t.name)])));
      if (d.status === 'running') timer = setTimeout(() => { void load(); }, 2000);
    } catch (e) {
      if (!disposed) showAlert(state, api.errorText(e));
    }
  }
  void load();
  return { refresh() { void load(); }, dispose() { disposed = true; if (timer) clearTimeout(timer); } };
}
