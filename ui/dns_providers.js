// DNS Providers: where certfleet puts DNS-01 challenge records (docs/acme-dns.md,
// docs/acme-dns-providers.md). The list (Name, Kind, Where, Secret, Created) and, for admins, the
// Add form whose fields follow the chosen kind; Delete asks first. Secrets are write-only: the
// API never returns them, so the list says only whether one is stored.
import * as api from './api.js';
import { h, replace, showAlert } from './dom.js';
import { deleteButton, feedback, fieldErrors, scrollRegion } from './widgets.js';
import * as fmt from './format.js';
import * as session from './session.js';

/**
 * @typedef {{key: string, label: string, type?: 'text' | 'password' | 'number' | 'checkbox' | 'textarea',
 *            help: string, required?: boolean, placeholder?: string, checked?: boolean, max?: number}} ProviderField
 * @typedef {{kind: string, label: string, intro: string, systemOnly?: boolean, fields: ProviderField[]}} ProviderKind
 */

const propagation = /** @type {ProviderField} */ ({ key: 'check_propagation', label: 'Check propagation', type: 'checkbox', checked: true,
  help: 'Wait until the zone\'s authoritative servers (found through acme_dns_resolver) answer the record before the CA looks. Turn off when the provider already waits, or its servers are not reachable from the workers.' });
const plainHttp = /** @type {ProviderField} */ ({ key: 'allow_plain_http', label: 'Allow plain http://', type: 'checkbox',
  help: 'Only for an API on a trusted host: the secret then crosses the network unencrypted.' });
/** @param {number} max */
const timeout = (max) => /** @type {ProviderField} */ ({ key: 'timeout_s', label: 'Timeout (s)', type: 'number', max, placeholder: max === 600 ? '60' : '30',
  help: `Deadline of one call, 1–${max} s. Empty: ${max === 600 ? 60 : 30} s.` });

/** Each kind's fields, once: the form, its help text and the body it sends. @type {ProviderKind[]} */
export const providerKinds = [
  { kind: 'rfc2136', label: 'RFC 2136 (TSIG-signed updates)', intro: 'A DNS server that accepts RFC 2136 updates signed with a TSIG key: BIND, Knot, PowerDNS with DNS updates enabled.',
    fields: [
      { key: 'server', label: 'Server', required: true, placeholder: '192.0.2.53:53', help: 'host:port of the zone\'s primary (port 53 when left out); held to acme_allow_list.' },
      { key: 'zone', label: 'Zone', placeholder: 'example.com', help: 'Empty: found per record by asking the server for SOA records.' },
      { key: 'tsig_key_name', label: 'TSIG key name', required: true, placeholder: 'certfleet-key', help: 'The key\'s name in the server\'s configuration (algorithm hmac-sha256).' },
      { key: 'tsig_secret', label: 'TSIG secret', type: 'password', required: true, help: 'Base64, as keymgr or tsig-keygen printed it. Sealed; never shown again.' }] },
  { kind: 'manual', label: 'Manual (records typed by hand)', intro: 'Each issuance stops at Awaiting Validation with the records to create; you create them and press Validate DNS.',
    fields: [
      { key: 'check_server', label: 'Check server', placeholder: '192.0.2.53:53', help: 'Where Validate DNS looks for your records first (host:port). Empty: the zone\'s own servers.' }] },
  { kind: 'exec', label: 'Program (exec)', systemOnly: true, intro: 'Runs PROGRAM present|cleanup FQDN VALUE on the worker host, never through a shell: an acme.sh script, a curl one-liner, anything. System admins only.',
    fields: [
      { key: 'program', label: 'Program', required: true, placeholder: '/usr/local/lib/certfleet/dns-hook', help: 'Absolute path, installed on every worker host and executable by certfleet\'s user.' },
      { key: 'env', label: 'Environment', type: 'textarea', placeholder: 'API_TOKEN=…', help: 'One NAME=value per line: the program\'s environment (with PATH and LC_ALL). Sealed; values are redacted from its output in the job log.' },
      timeout(600), propagation] },
  { kind: 'httpreq', label: 'HTTP request (httpreq)', intro: 'POSTs {"fqdn", "value"} to ENDPOINT/present and ENDPOINT/cleanup, as lego\'s httpreq provider does.',
    fields: [
      { key: 'endpoint', label: 'Endpoint', required: true, placeholder: 'https://dns-api.example.com/acme', help: 'Base URL; /present and /cleanup are appended. Held to acme_allow_list.' },
      { key: 'username', label: 'Username', help: 'HTTP basic auth (with the password), or empty.' },
      { key: 'password', label: 'Password', type: 'password', help: 'Sealed; never shown again.' },
      plainHttp, timeout(120), propagation] },
  { kind: 'powerdns', label: 'PowerDNS (HTTP API)', intro: 'PowerDNS Authoritative with api=yes: the TXT RRset is patched through its API, keeping the values already there.',
    fields: [
      { key: 'api_url', label: 'API URL', required: true, placeholder: 'https://pdns.example.com:8081', help: 'The server\'s base URL (certfleet adds /api/v1/…). Held to acme_allow_list.' },
      { key: 'api_key', label: 'API key', type: 'password', required: true, help: 'The server\'s api-key. Sealed; never shown again.' },
      { key: 'server_id', label: 'Server id', placeholder: 'localhost', help: 'PowerDNS\'s server id; empty: localhost.' },
      { key: 'zone', label: 'Zone', placeholder: 'example.com', help: 'Empty: the longest zone of the server\'s zone list that contains the name.' },
      plainHttp, timeout(120), propagation] },
];

/**
 * Where a provider sends its records, for the list.
 * @param {any} p
 */
export function providerWhere(p) {
  const s = p?.[p?.kind] ?? {};
  switch (p?.kind) {
    case 'rfc2136': return `${s.server ?? ''}${s.zone ? ` (zone ${s.zone})` : ''}`;
    case 'manual': return s.check_server ? `checked at ${s.check_server}` : 'checked at the zone\'s servers';
    case 'exec': return String(s.program ?? '');
    case 'httpreq': return String(s.endpoint ?? '');
    case 'powerdns': return `${s.api_url ?? ''}${s.zone ? ` (zone ${s.zone})` : ''}`;
    default: return '';
  }
}

/**
 * The body a filled form sends; a field error for what the browser can tell (an env line).
 * @param {ProviderKind} k
 * @param {string} name
 * @param {(key: string) => HTMLInputElement | HTMLTextAreaElement} input
 * @returns {{body?: any, field?: string, message?: string}}
 */
export function providerBody(k, name, input) {
  /** @type {Record<string, unknown>} */
  const section = {};
  for (const f of k.fields) {
    const el = input(f.key);
    if (f.type === 'checkbox') {
      section[f.key] = /** @type {HTMLInputElement} */ (el).checked;
    } else if (f.type === 'number') {
      if (el.value.trim() !== '') section[f.key] = Number(el.value.trim());
    } else if (f.type === 'textarea') {
      /** @type {Record<string, string>} */
      const env = {};
      for (const raw of el.value.split('\n')) {
        const line = raw.trim();
        if (!line) continue;
        const eq = line.indexOf('=');
        if (eq <= 0) return { field: `${k.kind}.${f.key}`, message: `Each line is NAME=value: "${line.slice(0, 40)}" has no name.` };
        env[line.slice(0, eq).trim()] = line.slice(eq + 1);
      }
      if (Object.keys(env).length) section[f.key] = env;
    } else if (el.value.trim() !== '') {
      section[f.key] = f.type === 'password' ? el.value : el.value.trim();
    }
  }
  return { body: { name, kind: k.kind, [k.kind]: section } };
}

/** @param {import('./router.js').PageContext} ctx @returns {import('./router.js').PageHandle} */
export function renderDnsProviders(ctx) {
  const { project } = ctx;
  const canAdmin = session.hasRole('admin');
  const kinds = providerKinds.filter((k) => !k.systemOnly || session.isSystem());
  const fb = feedback();
  let disposed = false;
  const tbody = h('tbody');
  const state = h('p', { class: 'muted', role: 'status', text: 'Loading…' });
  const columns = ['Name', 'Kind', 'Where', 'Secret', 'Created', 'Actions'];

  // Add (admin and above): a kind picker and that kind's fields, each error next to its field.
  const nameInput = h('input', { id: 'dp-name', name: 'name', type: 'text', autocomplete: 'off', spellcheck: 'false', required: true,
    placeholder: 'primary-dns', 'aria-describedby': 'dp-name-error' });
  const kindSelect = h('select', { id: 'dp-kind', name: 'kind', 'aria-describedby': 'dp-kind-intro' },
    ...kinds.map((k) => h('option', { value: k.kind, text: k.label })));
  const kindIntro = h('p', { class: 'setting-doc', id: 'dp-kind-intro' });
  const fieldsBox = h('div', { class: 'field-grid provider-fields' });
  const formError = h('p', { class: 'field-error', id: 'dp-form-error', role: 'alert' });
  const addButton = h('button', { type: 'submit', class: 'primary', text: 'Add provider' });
  /** @type {Map<string, HTMLInputElement | HTMLTextAreaElement>} */
  let inputs = new Map();

  /** @param {string} field @param {string} id */
  const errorEl = (field, id) => h('p', { class: 'field-error', id, 'data-field-error': field });

  function showKind() {
    const k = kinds.find((x) => x.kind === kindSelect.value) ?? kinds[0];
    kindIntro.textContent = k.intro;
    inputs = new Map();
    replace(fieldsBox, ...k.fields.map((f) => {
      const id = `dp-${k.kind}-${f.key}`;
      const attrs = { id, name: f.key, autocomplete: 'off', spellcheck: 'false', placeholder: f.placeholder ?? null,
        required: f.required ?? false, 'aria-describedby': `${id}-help ${id}-error` };
      const el = f.type === 'textarea' ? h('textarea', { ...attrs, rows: 3 })
        : h('input', { ...attrs, type: f.type ?? 'text', checked: f.checked ?? false,
          ...(f.type === 'number' ? { min: 1, max: f.max ?? null, inputmode: 'numeric' } : {}),
          ...(f.type === 'password' ? { autocomplete: 'new-password' } : {}) });
      inputs.set(f.key, el);
      const label = h('label', { for: id, text: f.required ? `${f.label} (required)` : f.label });
      return h('div', { class: f.type === 'checkbox' ? 'field checkbox-field' : 'field', 'data-field': `${k.kind}.${f.key}` },
        ...(f.type === 'checkbox' ? [el, label] : [label, el]),
        h('p', { class: 'setting-doc', id: `${id}-help`, text: f.help }),
        errorEl(`${k.kind}.${f.key}`, `${id}-error`));
    }));
  }
  kindSelect.addEventListener('change', showKind);

  const form = canAdmin ? h('form', { class: 'card inline-form', id: 'add-dns-provider', 'aria-labelledby': 'add-dp-title', novalidate: true },
    h('h2', { id: 'add-dp-title', text: 'Add DNS provider' }),
    h('div', { class: 'field-grid' },
      h('div', { class: 'field' }, h('label', { for: 'dp-name', text: 'Name (required)' }), nameInput, errorEl('name', 'dp-name-error')),
      h('div', { class: 'field' }, h('label', { for: 'dp-kind', text: 'Kind' }), kindSelect, kindIntro)),
    fieldsBox, formError, h('div', { class: 'form-actions' }, addButton)) : null;
  if (form) showKind();

  const errors = fieldErrors(form, formError);

  form?.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    errors.clear();
    const k = kinds.find((x) => x.kind === kindSelect.value) ?? kinds[0];
    const built = providerBody(k, nameInput.value.trim(), (key) => /** @type {HTMLInputElement} */ (inputs.get(key)));
    if (!built.body) {
      errors.show(built.field ?? '', built.message ?? '');
      return;
    }
    addButton.disabled = true;
    try {
      const r = await api.post(api.projectPath(project, '/dns-providers'), built.body);
      fb.ok(`DNS provider ${r.body?.name ?? built.body.name} added. Certificates issued with it use it from their next order.`);
      nameInput.value = '';
      showKind();
      void load();
    } catch (e) {
      if (e instanceof api.ApiError && e.field) errors.show(e.field, e.message);
      else formError.textContent = api.errorText(e);
    } finally {
      addButton.disabled = false;
    }
  });

  replace(ctx.root,
    h('div', { class: 'page-head' }, h('h1', { text: 'DNS Providers' }),
      h('p', { class: 'muted page-intro', text: 'Where ACME certificates put their DNS-01 challenge records: a DNS server taking RFC 2136 updates, PowerDNS, an HTTP API of yours, a program, or records you create by hand.' })),
    fb.el,
    form,
    scrollRegion('DNS providers', h('table', { id: 'dns-providers', class: 'phone-cards' },
      h('caption', { class: 'visually-hidden', text: 'DNS providers' }),
      h('thead', null, h('tr', null, ...columns.map((c) => h('th', { scope: 'col', text: c })))),
      tbody)), state);

  /** @param {any} p */
  function removeButton(p) {
    return deleteButton({ name: p.name, path: api.projectPath(project, `/dns-providers/${p.id}`),
      ask: { title: `Delete DNS provider ${p.name}?`,
        text: `${p.name} (${p.kind}) is removed from this project. A provider that a certificate still uses cannot be deleted.`,
        confirm: 'Delete provider' },
      done: `DNS provider ${p.name} deleted.`, fb, reload: () => { void load(); } });
  }

  /** @param {any} p */
  function row(p) {
    const section = p?.[p?.kind] ?? {};
    const names = Array.isArray(section.env_names) ? section.env_names : [];
    const secret = p.kind === 'manual' ? '—' : p.kind === 'exec' ? (names.length ? `env: ${names.join(', ')}` : 'none')
      : p.kind === 'httpreq' && !section.username ? 'none' : 'sealed';
    return h('tr', { 'data-id': String(p.id), 'data-name': p.name },
      h('td', { 'data-label': 'Name' }, h('strong', { text: p.name })),
      h('td', { 'data-label': 'Kind' }, h('span', { class: 'tag', 'data-kind': p.kind, text: p.kind })),
      h('td', { 'data-label': 'Where' }, h('code', { text: providerWhere(p) })),
      h('td', { 'data-label': 'Secret', text: secret }),
      h('td', { class: 'nowrap', 'data-label': 'Created' }, fmt.timeEl(p.created_at) || '—'),
      h('td', { class: 'actions', 'data-label': 'Actions' }, canAdmin ? removeButton(p) : ''));
  }

  async function load() {
    try {
      const r = await api.get(api.projectPath(project, '/dns-providers'));
      if (disposed) return;
      const items = Array.isArray(r.items) ? r.items : [];
      replace(tbody, ...items.map((/** @type {any} */ p) => row(p)));
      state.className = 'muted empty-state';
      state.setAttribute('role', 'status');
      state.textContent = items.length ? '' : `No DNS providers in this project. An ACME certificate needs one to prove it controls its names.${canAdmin ? ' Add one above.' : ' An admin can add one.'}`;
    } catch (e) {
      if (!disposed) showAlert(state, api.errorText(e));
    }
  }
  void load();
  return { refresh() { void load(); }, dispose() { disposed = true; } };
}
