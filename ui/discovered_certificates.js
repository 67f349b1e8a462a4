// Discovered certificates: what the scans found. /discovery/certificates?source=ID&finding=NAME:
// Subject, Issuer, Expires, Key, Findings (a tag per finding: critical red, warning orange, its
// text in the title), Seen At (endpoints with SNI and protocol), Last Seen, Managed (the
// certificate, or Import for admin+).
import * as api from './api.js';
import { allPages, certificateNames, forgetCertificateNames } from './catalog.js';
import { h, replace, showAlert } from './dom.js';
import { domainExpiry } from './domains.js';
import { feedback, fillPager, pageCount, scrollRegion } from './widgets.js';
import * as fmt from './format.js';
import { href, setQuery } from './router.js';
import * as session from './session.js';
import { findingLabel, findingTag, discoveryTabs, count } from './discovery.js';

/** @param {import('./router.js').PageContext} ctx @returns {import('./router.js').PageHandle} */
export function renderDiscoveredCertificates(ctx) {
  const { project, query } = ctx;
  const page = Math.max(1, Number.parseInt(query.get('page') ?? '1', 10) || 1);
  const pageSize = query.get('page_size');
  const source = query.get('source') ?? '';
  const finding = query.get('finding') ?? '';
  const canAdmin = session.hasRole('admin');
  const fb = feedback();
  let disposed = false;
  /** @type {Set<string>} rows whose Import form is open */
  const open = new Set();
  const tbody = h('tbody');
  const state = h('p', { class: 'muted', role: 'status', text: 'Loading…' });
  const pager = h('nav', { class: 'pager', 'aria-label': 'Pages' });
  const columns = ['Subject', 'Issuer', 'Expires', 'Key', 'Findings', 'Seen At', 'Last Seen', 'Managed'];

  const sourceSelect = h('select', { id: 'filter-source', name: 'source' }, h('option', { value: '', text: 'All sources' }));
  const findingSelect = h('select', { id: 'filter-finding', name: 'finding' }, h('option', { value: '', text: 'Any finding' }));
  if (source) sourceSelect.append(h('option', { value: source, text: source, selected: true }));
  sourceSelect.addEventListener('change', () => setQuery({ source: sourceSelect.value, page: null }));
  findingSelect.addEventListener('change', () => setQuery({ finding: findingSelect.value, page: null }));
  const filters = h('div', { class: 'filters', role: 'group', 'aria-label': 'Filters' },
    h('label', { for: 'filter-source', text: 'Source' }), sourceSelect,
    h('label', { for: 'filter-finding', text: 'Finding' }), findingSelect);

  replace(ctx.root,
    h('div', { class: 'page-head' }, h('h1', { text: 'Discovery' }),
      h('p', { class: 'muted page-intro', text: 'Certificates found by the scans: where each was seen and what is wrong with it. Import one with its key to manage it.' })),
    discoveryTabs('certificates', project),
    filters,
    fb.el,
    scrollRegion('Discovered certificates', h('table', { id: 'discovered-certificates' },
      h('caption', { class: 'visually-hidden', text: 'Discovered certificates' }),
      h('thead', null, h('tr', null, ...columns.map((c) => h('th', { scope: 'col', text: c })))),
      tbody)), state, pager);

  /** @type {Map<string, string>} source id -> name */
  let sourceNames = new Map();

  /** @param {any} c */
  function seenAt(c) {
    const eps = Array.isArray(c.endpoints) ? c.endpoints : [];
    if (!eps.length) return h('span', { class: 'muted', text: '—' });
    return h('details', { class: 'seen-at' },
      h('summary', { text: count(eps.length, 'endpoint') }),
      h('ul', { class: 'plain-list endpoint-list' }, ...eps.map((/** @type {any} */ e) => {
        const ep = String(e.endpoint);
        const addr = e.address && !ep.startsWith(`${e.address}:`) && !ep.startsWith(`[${e.address}]:`) ? ` (${e.address})` : '';
        /** @type {Array<Node | string>} */
        const meta = [`SNI ${e.sni ? e.sni : 'none'}`, String(e.protocol ?? '')];
        if (sourceNames.has(String(e.source_id))) meta.push(/** @type {string} */ (sourceNames.get(String(e.source_id))));
        const seen = fmt.timeEl(e.last_seen_at);
        if (seen) meta.push(seen);
        return h('li', { 'data-endpoint': ep },
          h('code', { text: `${ep}${addr}` }),
          h('span', { class: 'endpoint-meta' }, ...meta.filter((m) => m !== '').flatMap((m, i) => (i ? [' · ', m] : [m]))));
      })));
  }

  /** @param {any} c */
  function defaultName(c) {
    const san = Array.isArray(c.sans) && c.sans.length ? String(c.sans[0]) : '';
    const cn = /CN=([^,]+)/.exec(String(c.subject ?? ''))?.[1] ?? '';
    return (san || cn || 'discovered').replace(/^\*\./, 'wildcard.').slice(0, 200);
  }

  /**
   * The Import form in a row below the certificate's: name, key PEM, optional chain PEM; the
   * API's 400 at the field it names.
   * @param {any} c @param {HTMLButtonElement} opener
   */
  function importRow(c, opener) {
    const id = String(c.id);
    const p = `import-${id}`;
    /** @type {Record<string, {input: HTMLInputElement | HTMLTextAreaElement, error: HTMLElement}>} */
    const f = {};
    /** @param {string} key @param {string} label @param {HTMLInputElement | HTMLTextAreaElement} input */
    const field = (key, label, input) => {
      const error = h('p', { class: 'field-error', id: `${p}-${key}-error`, 'data-field-error': key });
      input.setAttribute('aria-describedby', `${p}-${key}-error`);
      f[key] = { input, error };
      return h('div', { class: 'field' }, h('label', { for: input.id, text: label }), input, error);
    };
    const name = h('input', { id: `${p}-name`, name: 'name', type: 'text', autocomplete: 'off', spellcheck: 'false', value: defaultName(c) });
    const key = h('textarea', { id: `${p}-key`, name: 'key_pem', rows: 5, spellcheck: 'false', class: 'pem-input', placeholder: '-----BEGIN PRIVATE KEY-----' });
    const chain = h('textarea', { id: `${p}-chain`, name: 'chain_pem', rows: 4, spellcheck: 'false', class: 'pem-input', placeholder: '-----BEGIN CERTIFICATE-----' });
    const formError = h('p', { class: 'field-error', role: 'alert' });
    const submit = h('button', { type: 'submit', class: 'primary', text: 'Import', 'aria-label': `Import ${c.subject}` });
    const cancel = h('button', { type: 'button', text: 'Cancel' });
    const form = h('form', { class: 'import-form', 'data-import-for': id, 'aria-label': `Import ${c.subject}`, novalidate: true },
      h('p', { class: 'setting-doc', text: 'The leaf becomes a managed certificate with the key you bring (a scan never sees one). Without a chain, the one the server sent is used.' }),
      h('div', { class: 'field-grid' },
        field('name', 'Certificate name', name),
        field('key_pem', 'Private key (PEM)', key),
        field('chain_pem', 'Chain (PEM, optional)', chain)),
      h('div', { class: 'form-actions' }, cancel, ' ', submit), formError);
    const tr = h('tr', { class: 'detail-row', id: `import-row-${id}`, 'data-import-row': id },
      h('td', { colspan: columns.length }, form));
    cancel.addEventListener('click', () => {
      tr.hidden = true;
      open.delete(id);
      opener.setAttribute('aria-expanded', 'false');
      opener.focus();
    });
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      for (const x of Object.values(f)) { x.error.textContent = ''; x.input.removeAttribute('aria-invalid'); }
      formError.textContent = '';
      /** @type {Record<string, string>} */
      const body = { name: name.value.trim(), key_pem: key.value };
      if (chain.value.trim()) body.chain_pem = chain.value;
      submit.disabled = true;
      try {
        const r = await api.post(api.projectPath(project, `/discovered-certificates/${id}/import`), body);
        const certId = String(r.body?.id ?? '');
        open.delete(id);
        forgetCertificateNames(project);
        fb.ok(`${c.subject} imported as `, h('a', { href: href(`/certificates/${certId}`, { project }), 'data-certificate-id': certId, text: String(r.body?.name ?? body.name) }));
        void load();
      } catch (e) {
        const target = e instanceof api.ApiError && e.field ? f[e.field] : undefined;
        if (target) {
          target.error.textContent = api.errorText(e);
          target.input.setAttribute('aria-invalid', 'true');
          target.input.focus();
        } else {
          formError.textContent = api.errorText(e);
        }
      } finally {
        submit.disabled = false;
      }
    });
    return tr;
  }

  /** @param {any} c @param {Map<string, string>} certNames */
  function rows(c, certNames) {
    const id = String(c.id);
    const findings = Array.isArray(c.findings) ? c.findings : [];
    const managed = c.managed_certificate_id ? String(c.managed_certificate_id) : '';
    /** @type {HTMLElement[]} */
    const extra = [];
    /** @type {Node | string} */
    let managedCell = h('span', { class: 'muted', text: 'not managed' });
    if (managed) {
      managedCell = h('a', { href: href(`/certificates/${managed}`, { project }), 'data-certificate-id': managed, text: certNames.get(managed) ?? 'certificate' });
    } else if (canAdmin) {
      const b = h('button', { type: 'button', class: 'action', 'data-action': 'import', text: 'Import', 'aria-label': `Import ${c.subject}`,
        'aria-expanded': open.has(id) ? 'true' : 'false', 'aria-controls': `import-row-${id}` });
      const form = importRow(c, b);
      form.hidden = !open.has(id);
      b.addEventListener('click', () => {
        const show = form.hidden;
        form.hidden = !show;
        b.setAttribute('aria-expanded', show ? 'true' : 'false');
        if (show) { open.add(id); form.querySelector('textarea')?.focus(); } else open.delete(id);
      });
      managedCell = b;
      extra.push(form);
    }
    const keyText = c.key_type ? `${String(c.key_type).toUpperCase()}${c.key_bits ? ` ${c.key_bits}` : ''}` : '';
    const sans = Array.isArray(c.sans) ? c.sans.map(String) : [];
    return [h('tr', { 'data-id': id, 'data-fingerprint': String(c.fingerprint_sha256 ?? '') },
      h('td', { class: 'subject-cell' }, h('strong', { text: c.subject ?? '' }),
        sans.length ? h('span', { class: 'sans muted', text: sans.join(', ') }) : ''),
      h('td', { class: 'issuer-cell', text: c.issuer ?? '' }),
      h('td', { class: 'nowrap' }, domainExpiry(c.not_after)),
      h('td', { class: 'nowrap', text: keyText }),
      h('td', { class: 'findings-cell' }, findings.length ? findings.map((/** @type {any} */ x) => findingTag(x)) : h('span', { class: 'muted', text: 'none' })),
      h('td', null, seenAt(c)),
      h('td', null, fmt.timeEl(c.last_seen_at)),
      h('td', { class: 'managed-cell' }, managedCell)), ...extra];
  }

  /** The filter offers the server's finding table (the page's finding_table), in its order.
   * @param {any} table */
  function fillFindings(table) {
    const names = new Set(Array.isArray(table) ? table.map((/** @type {any} */ f) => String(f.name)) : []);
    if (finding) names.add(finding);
    replace(findingSelect, h('option', { value: '', text: 'Any finding' }),
      ...[...names].map((n) => h('option', { value: n, text: findingLabel(n), selected: n === finding })));
  }

  async function load() {
    const q = new URLSearchParams();
    if (source) q.set('source', source);
    if (finding) q.set('finding', finding);
    q.set('page', String(page));
    if (pageSize) q.set('page_size', pageSize);
    try {
      const [r, sources, certNames] = await Promise.all([
        api.get(api.projectPath(project, `/discovered-certificates?${q}`)),
        allPages(api.projectPath(project, '/discovery-sources'), 2000).catch(() => []),
        certificateNames(project)]);
      if (disposed) return;
      sourceNames = new Map(sources.map((s) => [String(s.id), String(s.name)]));
      replace(sourceSelect, h('option', { value: '', text: 'All sources' }),
        ...sources.map((s) => h('option', { value: String(s.id), text: String(s.name), selected: String(s.id) === source })),
        source && !sourceNames.has(source) ? h('option', { value: source, text: `${source} (deleted)`, selected: true }) : null);
      const items = Array.isArray(r.items) ? r.items : [];
      fillFindings(r.finding_table);
      replace(tbody, ...items.flatMap((/** @type {any} */ c) => rows(c, certNames)));
      state.className = 'muted empty-state';
      state.setAttribute('role', 'status');
      state.textContent = items.length ? ''
        : source || finding ? 'No discovered certificate matches these filters.'
          : 'No certificates discovered yet. Run a source (Sources tab); a scan that reaches nothing finds nothing: '
            + 'check discovery_allow_list, the ports and the job\'s log.';
      fillPager(pager, page, pageCount(r), (/** @type {number} */ n) => href('/discovery/certificates', { project, source, finding, page: n, page_size: pageSize }));
    } catch (e) {
      if (!disposed) showAlert(state, api.errorText(e));
    }
  }
  void load();
  return { refresh() { void load(); }, dispose() { disposed = true; } };
}
