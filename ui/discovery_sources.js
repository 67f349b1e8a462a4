// Discovery sources: the endpoints and ranges that a discovery_execute job scans with one TLS
// handshake per target. /discovery: Name, Targets (count, the endpoints/CIDRs/ports/SNI in a
// summary that expands), Schedule, Last Run (time, ok/failed of scanned, certificates, its job);
// Run now (operator+), Add source and Delete (admin+).
import * as api from './api.js';
import { h, replace, showAlert } from './dom.js';
import { feedback, fillPager, pageCount, scrollRegion } from './widgets.js';
import * as fmt from './format.js';
import { href } from './router.js';
import * as session from './session.js';
import { scheduleText, splitList, discoveryTabs, count } from './discovery.js';

/** @param {import('./router.js').PageContext} ctx @returns {import('./router.js').PageHandle} */
export function renderDiscoverySources(ctx) {
  const { project, query } = ctx;
  const page = Math.max(1, Number.parseInt(query.get('page') ?? '1', 10) || 1);
  const pageSize = query.get('page_size');
  const canRun = session.hasRole('operator');
  const canAdmin = session.hasRole('admin');
  const fb = feedback();
  let disposed = false;
  const tbody = h('tbody');
  const state = h('p', { class: 'muted', role: 'status', text: 'Loading…' });
  const pager = h('nav', { class: 'pager', 'aria-label': 'Pages' });
  const columns = ['Name', 'Targets', 'Schedule', 'Last Run', 'Actions'];

  // Add source (admin and above). Every field has its error line; the API's 400 names the field
  // (endpoints[1], cidrs[0], ports[2], sni[0], schedule_s, name) and its message goes there.
  /** @type {Record<string, {input: HTMLInputElement | HTMLTextAreaElement | HTMLSelectElement, error: HTMLElement}>} */
  const fields = {};
  /**
   * @param {string} key the API's field name
   * @param {string} label
   * @param {HTMLInputElement | HTMLTextAreaElement} input
   * @param {string} hint
   */
  const field = (key, label, input, hint) => {
    const error = h('p', { class: 'field-error', id: `source-${key}-error`, 'data-field-error': key });
    input.setAttribute('aria-describedby', `source-${key}-hint source-${key}-error`);
    fields[key] = { input, error };
    return h('div', { class: 'field' },
      h('label', { for: input.id, text: label }), input,
      h('p', { class: 'setting-doc', id: `source-${key}-hint`, text: hint }), error);
  };
  const nameInput = h('input', { id: 'source-name', name: 'name', type: 'text', autocomplete: 'off', spellcheck: 'false', required: true });
  const endpointsInput = h('textarea', { id: 'source-endpoints', name: 'endpoints', rows: 3, spellcheck: 'false', placeholder: 'www.example.com:443\n10.0.0.7:8443' });
  const cidrsInput = h('textarea', { id: 'source-cidrs', name: 'cidrs', rows: 3, spellcheck: 'false', placeholder: '10.0.0.0/24' });
  const portsInput = h('input', { id: 'source-ports', name: 'ports', type: 'text', autocomplete: 'off', spellcheck: 'false', placeholder: '443, 8443' });
  const sniInput = h('textarea', { id: 'source-sni', name: 'sni', rows: 2, spellcheck: 'false', placeholder: 'www.example.com' });
  const everyInput = h('input', { id: 'source-every', name: 'every', type: 'number', min: 1, step: 1, value: '24', 'aria-describedby': 'source-schedule_s-hint source-schedule_s-error' });
  const unitSelect = h('select', { id: 'source-schedule', name: 'schedule', 'aria-describedby': 'source-schedule_s-hint source-schedule_s-error' },
    h('option', { value: '0', text: 'By hand only' }), h('option', { value: '3600', text: 'Every N hours' }), h('option', { value: '86400', text: 'Every N days' }));
  const scheduleError = h('p', { class: 'field-error', id: 'source-schedule_s-error', 'data-field-error': 'schedule_s' });
  fields.schedule_s = { input: everyInput, error: scheduleError };
  const syncEvery = () => { everyInput.disabled = unitSelect.value === '0'; };
  unitSelect.addEventListener('change', syncEvery);
  syncEvery();
  const formError = h('p', { class: 'field-error', id: 'source-form-error', role: 'alert' });
  const addButton = h('button', { type: 'submit', class: 'primary', text: 'Add source' });
  const form = canAdmin ? h('form', { class: 'card inline-form source-form', id: 'add-source', 'aria-labelledby': 'add-source-title', novalidate: true },
    h('h2', { id: 'add-source-title', text: 'Add source' }),
    h('div', { class: 'field-grid' },
      field('name', 'Name', nameInput, 'A name for this set of targets, unique in the project.'),
      h('div', { class: 'field' },
        h('label', { for: 'source-schedule', text: 'Schedule' }),
        h('div', { class: 'schedule-row' }, unitSelect, h('label', { class: 'inline-label', for: 'source-every', text: 'N =' }), everyInput),
        h('p', { class: 'setting-doc', id: 'source-schedule_s-hint', text: 'By hand (Run now), or by the scheduler every 1 hour to 30 days.' }), scheduleError),
      field('endpoints', 'Endpoints', endpointsInput, 'host:port or [IPv6]:port, one per line or separated by commas.'),
      field('cidrs', 'CIDRs', cidrsInput, 'Ranges to scan on the ports below, e.g. 10.0.0.0/24. Every address must be inside discovery_allow_list.'),
      field('ports', 'Ports', portsInput, 'Ports scanned on each address of the CIDRs (default 443).'),
      field('sni', 'SNI names', sniInput, 'Names sent in the TLS handshake; each target is probed once per name. Empty: the endpoint\'s host.')),
    h('div', { class: 'form-actions' }, addButton),
    formError) : null;

  function clearErrors() {
    for (const f of Object.values(fields)) { f.error.textContent = ''; f.input.removeAttribute('aria-invalid'); }
    formError.textContent = '';
  }

  form?.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    clearErrors();
    /** @type {Record<string, unknown>} */
    const body = { name: nameInput.value.trim() };
    const endpoints = splitList(endpointsInput.value);
    const cidrs = splitList(cidrsInput.value);
    const ports = splitList(portsInput.value).map((p) => (/^\d+$/.test(p) ? Number(p) : p));
    const sni = splitList(sniInput.value);
    if (endpoints.length) body.endpoints = endpoints;
    if (cidrs.length) body.cidrs = cidrs;
    if (ports.length) body.ports = ports;
    if (sni.length) body.sni = sni;
    const unit = Number(unitSelect.value);
    const every = Number(everyInput.value);
    body.schedule_s = unit > 0 ? (Number.isFinite(every) ? Math.round(every * unit) : -1) : 0;
    addButton.disabled = true;
    try {
      const r = await api.post(api.projectPath(project, '/discovery-sources'), body);
      fb.ok(`Added ${r.body?.name ?? body.name} (${count(Number(r.body?.targets ?? 0), 'target')}). Press Run now to scan it.`);
      for (const el of [nameInput, endpointsInput, cidrsInput, portsInput, sniInput]) el.value = '';
      void load();
    } catch (e) {
      const key = e instanceof api.ApiError && e.field ? e.field.replace(/\[\d+\]$/, '') : '';
      const f = key ? fields[key] : undefined;
      if (e instanceof api.ApiError && f) {
        f.error.textContent = e.message;
        f.input.setAttribute('aria-invalid', 'true');
        f.input.focus();
      } else {
        formError.textContent = api.errorText(e);
      }
    } finally {
      addButton.disabled = false;
    }
  });

  replace(ctx.root,
    h('div', { class: 'page-head' }, h('h1', { text: 'Discovery' }),
      h('p', { class: 'muted page-intro', text: 'Endpoints and ranges scanned with one TLS handshake each; every certificate they send is kept with where it was seen and what is wrong with it.' })),
    discoveryTabs('sources', project),
    fb.el,
    scrollRegion('Discovery sources', h('table', { id: 'discovery-sources' },
      h('caption', { class: 'visually-hidden', text: 'Discovery sources' }),
      h('thead', null, h('tr', null, ...columns.map((c) => h('th', { scope: 'col', text: c })))),
      tbody)), state, pager,
    form);

  /** @param {any} s */
  function runButton(s) {
    const b = h('button', { type: 'button', class: 'action', 'data-action': 'run', text: 'Run now', 'aria-label': `Run now: ${s.name}` });
    b.addEventListener('click', async () => {
      b.disabled = true;
      try {
        const r = await api.post(api.projectPath(project, `/discovery-sources/${s.id}/run`));
        const jobId = String(r.body?.job_id ?? '');
        fb.ok(r.body?.created === false ? `${s.name}: a scan from this minute is already queued: ` : `${s.name}: scan queued: `,
          h('a', { href: href(`/jobs/${jobId}`, { project }), 'data-job-id': jobId, text: `job ${jobId}` }));
        if (jobId) void followJob(jobId);
      } catch (e) {
        fb.fail(`${s.name}: ${api.errorText(e)}`);
      } finally {
        b.disabled = false;
      }
    });
    return b;
  }

  /**
   * Reads the scan's job every 2 s until it has finished, then the list again (its Last Run).
   * @param {string} jobId
   */
  async function followJob(jobId) {
    const end = Date.now() + 10 * 60000;
    while (!disposed && Date.now() < end) {
      await new Promise((r) => setTimeout(r, 2000));
      if (disposed) return;
      try {
        const j = await api.get(api.projectPath(project, `/jobs/${jobId}`));
        if (j?.status !== 'pending' && j?.status !== 'active') { void load(); return; }
      } catch {
        return;  // the job page says more; the list is read again on the next refresh
      }
    }
  }

  /** @param {any} s @param {HTMLElement} cell */
  function deleteButton(s, cell) {
    const b = h('button', { type: 'button', class: 'action danger', 'data-action': 'delete', text: 'Delete', 'aria-label': `Delete ${s.name}` });
    b.addEventListener('click', () => {
      const keep = [...cell.childNodes];
      const yes = h('button', { type: 'button', class: 'action danger', 'data-action': 'confirm-delete', text: 'Yes, delete', 'aria-label': `Yes, delete ${s.name}` });
      const no = h('button', { type: 'button', class: 'action', 'data-action': 'cancel-delete', text: 'Keep' });
      no.addEventListener('click', () => { replace(cell, ...keep); b.focus(); });
      yes.addEventListener('click', async () => {
        yes.disabled = true;
        no.disabled = true;
        try {
          await api.del(api.projectPath(project, `/discovery-sources/${s.id}`));
          fb.ok(`${s.name} deleted; the certificates it found stay listed.`);
          void load();
        } catch (e) {
          fb.fail(`${s.name}: ${api.errorText(e)}`);
          replace(cell, ...keep);
        }
      });
      replace(cell, h('span', { class: 'confirm-text', text: `Delete source ${s.name}?` }), ' ', yes, ' ', no);
      no.focus();
    });
    return b;
  }

  /** @param {any} s */
  function targetsCell(s) {
    const endpoints = Array.isArray(s.endpoints) ? s.endpoints.map(String) : [];
    const cidrs = Array.isArray(s.cidrs) ? s.cidrs.map(String) : [];
    const ports = Array.isArray(s.ports) ? s.ports.map(String) : [];
    const sni = Array.isArray(s.sni) ? s.sni.map(String) : [];
    const parts = [];
    if (endpoints.length) parts.push(count(endpoints.length, 'endpoint'));
    if (cidrs.length) parts.push(`${count(cidrs.length, 'range')} on port${ports.length === 1 ? '' : 's'} ${ports.length ? ports.join(', ') : '443'}`);
    if (sni.length) parts.push(`SNI ${sni.length > 2 ? `${sni.slice(0, 2).join(', ')} +${sni.length - 2}` : sni.join(', ')}`);
    /** @param {string} term @param {string[]} list */
    const item = (term, list) => list.length ? [h('dt', { text: term }), h('dd', null, h('ul', { class: 'plain-list' }, ...list.map((x) => h('li', null, h('code', { text: x })))))] : [];
    return h('details', { class: 'targets' },
      h('summary', null, h('strong', { class: 'target-count', text: count(Number(s.targets ?? 0), 'target') }), ' ',
        h('span', { class: 'muted target-summary', text: parts.join(' · ') })),
      h('dl', { class: 'summary target-list' },
        ...item('Endpoints', endpoints), ...item('CIDRs', cidrs), ...(cidrs.length ? item('Ports', ports.length ? ports : ['443 (default)']) : []),
        ...item('SNI', sni)));
  }

  /** @param {any} s */
  function lastRunCell(s) {
    const r = s.last_run;
    if (!r) return h('span', { class: 'muted', text: 'never' });
    const ok = Number(r.ok ?? 0), failed = Number(r.failed ?? 0), scanned = Number(r.scanned ?? 0);
    const cls = scanned > 0 && ok === 0 ? 'run-failed' : failed > 0 ? 'run-partial' : 'run-ok';
    const jobId = String(r.job_id ?? '');
    return h('span', { class: `last-run ${cls}` },
      fmt.timeEl(r.finished_at), h('br'),
      h('span', { class: 'run-counts', text: `${ok} ok / ${failed} failed of ${scanned} scanned` }), h('br'),
      h('a', { href: href('/discovery/certificates', { project, source: s.id }), 'data-certificates-for': s.id, text: count(Number(r.certificates ?? 0), 'certificate') }),
      ' · ', jobId ? h('a', { href: href(`/jobs/${jobId}`, { project }), 'data-job-id': jobId, text: 'job' }) : '');
  }

  /** @param {any} s */
  function row(s) {
    const actions = h('td', { class: 'actions' });
    replace(actions, canRun ? runButton(s) : null, canAdmin ? [' ', deleteButton(s, actions)] : []);
    return h('tr', { 'data-id': String(s.id), 'data-name': String(s.name) },
      h('td', null, h('strong', { text: s.name })),
      h('td', { class: 'targets-cell' }, targetsCell(s)),
      h('td', { class: 'nowrap', text: scheduleText(s.schedule_s) }),
      h('td', null, lastRunCell(s)),
      actions);
  }

  async function load() {
    try {
      const r = await api.get(api.projectPath(project, `/discovery-sources?page=${page}${pageSize ? `&page_size=${encodeURIComponent(pageSize)}` : ''}`));
      if (disposed) return;
      const items = Array.isArray(r.items) ? r.items : [];
      replace(tbody, ...items.map((/** @type {any} */ s) => row(s)));
      state.className = 'muted empty-state';
      state.setAttribute('role', 'status');
      if (items.length) {
        state.textContent = '';
      } else {
        replace(state, 'No discovery sources in this project. A source names endpoints (host:port) or ranges (CIDRs and ports) '
          + 'that a discovery job scans with one TLS handshake each, keeping every certificate it is sent. '
          + 'Nothing outside the system setting discovery_allow_list is ever scanned, and it is empty (nothing allowed) '
          + 'until a system admin sets it on the ',
        session.isSystem() ? h('a', { href: href('/settings', { project }), text: 'Settings page' }) : 'Settings page',
        `.${canAdmin ? ' Then add a source below.' : ' An admin can then add a source.'}`);
      }
      fillPager(pager, page, pageCount(r), (/** @type {number} */ n) => href('/discovery', { project, page: n, page_size: pageSize }));
    } catch (e) {
      if (!disposed) showAlert(state, api.errorText(e));
    }
  }
  void load();
  return { refresh() { void load(); }, dispose() { disposed = true; } };
}
