// AD CS: the project's Microsoft AD CS CAs, reached through their CEP/CES web services
// (docs/msca.md, DESIGN §13), and the certificate templates each CA's account may enroll. The list
// (Name, Authentication, CEP URL, Default Template, Policy Fetched, Templates); per CA its
// templates with Refresh Policy (operator and above) and Enroll (admin: a form below the
// template's row); the Add form (admin) whose credential fields follow the authentication kind;
// Delete asks first. Secrets are write-only: the API never returns them.
import * as api from './api.js';
import { allPages } from './catalog.js';
import { h, replace, showAlert } from './dom.js';
import { domainExpiry } from './domains.js';
import { deleteButton, feedback, fieldErrors, scrollRegion } from './widgets.js';
import * as fmt from './format.js';
import { href } from './router.js';
import * as session from './session.js';

/**
 * @typedef {{key: string, label: string, type?: 'text' | 'password' | 'textarea', secret?: boolean,
 *            help: string, required?: boolean, placeholder?: string}} AuthField
 * @typedef {{kind: string, label: string, short: string, intro: string, fields: AuthField[]}} AuthKind
 */

/** Each authentication kind's fields, once: the form, its help text and the `auth` it sends. @type {AuthKind[]} */
export const authKinds = [
  { kind: 'username_password', label: 'Username and password', short: 'password',
    intro: 'A WS-Security UsernameToken over TLS: the CEP and CES endpoints published with the UsernamePassword authentication type (…_UsernamePassword/service.svc).',
    fields: [
      { key: 'username', label: 'Username', required: true, placeholder: 'CORP\\svc-certfleet', help: 'CORP\\svc-certfleet or svc-certfleet@corp.example: an account that may Read and Enroll the templates.' },
      { key: 'password', label: 'Password', type: 'password', required: true, help: 'Sealed; never shown again.' }] },
  { kind: 'client_certificate', label: 'Client certificate', short: 'client certificate',
    intro: 'TLS client authentication: the endpoints published with the Certificate authentication type (…_Certificate/service.svc).',
    fields: [
      { key: 'cert_pem', label: 'Certificate (PEM)', type: 'textarea', required: true, placeholder: '-----BEGIN CERTIFICATE-----', help: 'One certificate, valid now. The list shows its subject and expiry.' },
      { key: 'key_pem', label: 'Private key (PEM)', type: 'textarea', secret: true, required: true, placeholder: '-----BEGIN PRIVATE KEY-----', help: 'Its unencrypted key. Sealed; never shown again.' }] },
  { kind: 'kerberos', label: 'Kerberos', short: 'Kerberos',
    intro: 'Kerberos (HTTP Negotiate) against the endpoints published with the Kerberos authentication type: the principal\'s password or its keytab, one of the two.',
    fields: [
      { key: 'principal', label: 'Principal', required: true, placeholder: 'svc-certfleet', help: 'The service account, alone or with @REALM (the same realm).' },
      { key: 'realm', label: 'Realm', required: true, placeholder: 'CORP.EXAMPLE', help: 'The Active Directory domain\'s DNS name in capitals.' },
      { key: 'password', label: 'Password', type: 'password', help: 'The principal\'s password, or leave it empty and give a keytab. Sealed; never shown again.' },
      { key: 'keytab_b64', label: 'Keytab (base64)', type: 'textarea', secret: true, placeholder: 'BQIAAAB…', help: 'The keytab file in base64 (base64 -w0 svc-certfleet.keytab), or leave it empty and give the password. Sealed; never shown again.' },
      { key: 'kdc', label: 'KDC', placeholder: 'dc01.corp.example:88', help: 'host:port of a domain controller, held to msca_allow_list. Empty: the realm\'s KDCs as the workers\' krb5.conf finds them.' }] },
];

/** CES authentication types in words (the policy's ces_urls[].authentication). */
const cesAuth = /** @type {Record<string, string>} */ ({ username_password: 'username/password', client_certificate: 'client certificate', kerberos: 'Kerberos', anonymous: 'anonymous' });

/**
 * The key types an enrollment for a template may ask for, as the API decides them: RSA sizes at
 * least the template's minimum, or the template's curve.
 * @param {any} t
 * @returns {string[]}
 */
export function keyTypesFor(t) {
  const alg = String(t?.key_algorithm ?? 'RSA').toUpperCase();
  const min = Number(t?.min_key_size) || 0;
  if (alg.startsWith('RSA')) return ['rsa-2048', 'rsa-3072'].filter((k) => Number(k.slice(4)) >= min);
  if (alg.includes('P256')) return ['ecdsa-p256'];
  if (alg.includes('P384')) return ['ecdsa-p384'];
  return ['rsa-2048', 'rsa-3072', 'ecdsa-p256', 'ecdsa-p384'];
}

/**
 * Text that may wrap after each of `chars` (a URL after "/", an OID after "."): text nodes and
 * <wbr> elements, so a long URL breaks where it reads well instead of anywhere.
 * @param {string} text @param {string} chars
 * @returns {Array<string | HTMLElement>}
 */
function breakable(text, chars) {
  /** @type {Array<string | HTMLElement>} */
  const parts = [];
  let run = '';
  for (const c of text) {
    run += c;
    if (chars.includes(c)) { parts.push(run, h('wbr')); run = ''; }
  }
  if (run) parts.push(run);
  return parts;
}

/** "ECDSA_P256" → "ECDSA P-256". @param {unknown} alg */
function keyLabel(alg) {
  return String(alg || 'RSA').replace(/_P(\d+)$/, ' P-$1');
}

/**
 * A CA's authentication, for the list: the kind and who it signs in as (never a secret).
 * @param {any} auth
 */
export function authCell(auth) {
  const kind = authKinds.find((k) => k.kind === auth?.kind);
  const tag = h('span', { class: `tag auth-${String(auth?.kind ?? '').replace(/[^a-z_]/g, '')}`, text: kind?.short ?? String(auth?.kind ?? '') });
  switch (auth?.kind) {
    case 'username_password':
      return [tag, h('code', { class: 'auth-who', text: String(auth.username ?? '') })];
    case 'client_certificate':
      return [tag, h('span', { class: 'auth-who', text: String(auth.cert_subject ?? '') }),
        auth.cert_not_after ? h('span', { class: 'auth-meta' }, 'until ', domainExpiry(String(auth.cert_not_after))) : null];
    case 'kerberos': {
      const principal = String(auth.principal ?? '');
      const who = principal.includes('@') || !auth.realm ? principal : `${principal}@${auth.realm}`;
      const meta = [auth.credential ? String(auth.credential) : '', auth.kdc ? `KDC ${auth.kdc}` : ''].filter(Boolean).join(' · ');
      return [tag, h('code', { class: 'auth-who', text: who }), meta ? h('span', { class: 'auth-meta muted', text: meta }) : null];
    }
    default:
      return [tag];
  }
}

/** @param {import('./router.js').PageContext} ctx @returns {import('./router.js').PageHandle} */
export function renderMscaCas(ctx) {
  const { project } = ctx;
  const canOperate = session.hasRole('operator');
  const canAdmin = session.hasRole('admin');
  const fb = feedback();
  let disposed = false;
  const tbody = h('tbody');
  const cards = h('div', { class: 'msca-ca-cards' });
  const state = h('p', { class: 'muted', role: 'status', text: 'Loading…' });
  const columns = ['Name', 'Authentication', 'CEP URL', 'Default Template', 'Policy Fetched', 'Templates', 'Actions'];
  const templateColumns = ['Template', 'Display Name', 'OID', 'Key', 'Minimum Key Size', 'CES URLs', 'Actions'];

  // Add (admin and above): the CA's URLs, the authentication kind and its fields, each error under
  // the field the API names.
  /** @param {string} field @param {string} id */
  const errorEl = (field, id) => h('p', { class: 'field-error', id, 'data-field-error': field });
  /**
   * A labelled field with its help and error lines.
   * @param {string} field the API's name for it @param {string} id @param {string} label
   * @param {HTMLElement} input @param {string} help
   */
  const field = (field, id, label, input, help) => {
    input.setAttribute('aria-describedby', `${help ? `${id}-help ` : ''}${id}-error`);
    return h('div', { class: 'field', 'data-field': field }, h('label', { for: id, text: label }), input,
      help ? h('p', { class: 'setting-doc', id: `${id}-help`, text: help }) : null, errorEl(field, `${id}-error`));
  };
  /** @param {string} id @param {string} name @param {string} placeholder @param {boolean} [required] */
  const text = (id, name, placeholder, required = false) => h('input', { id, name, type: 'text', autocomplete: 'off', spellcheck: 'false', placeholder, required });
  const nameInput = text('ms-name', 'name', 'corp-ca', true);
  const cepInput = text('ms-cep-url', 'cep_url', 'https://ca01.corp.example/ADPolicyProvider_CEP_UsernamePassword/service.svc/CEP', true);
  const cesInput = text('ms-ces-url', 'ces_url', 'https://ca01.corp.example/CORP-CA_CES_UsernamePassword/service.svc/CES');
  const bundleInput = h('textarea', { id: 'ms-ca-bundle', name: 'ca_bundle_pem', rows: 3, spellcheck: 'false', placeholder: '-----BEGIN CERTIFICATE-----' });
  const templateInput = text('ms-default-template', 'default_template', 'WebServer');
  const renewalSelect = h('select', { id: 'ms-renewal-mode', name: 'renewal_mode' },
    h('option', { value: 'new_key', text: 'New key (default)' }), h('option', { value: 'renew_with_current', text: 'Renew with the current key' }));
  const kindSelect = h('select', { id: 'ms-auth-kind', name: 'auth.kind' }, ...authKinds.map((k) => h('option', { value: k.kind, text: k.label })));
  const authBox = h('div', { class: 'field-grid auth-fields' });
  const formError = h('p', { class: 'field-error', id: 'ms-form-error', role: 'alert' });
  const addButton = h('button', { type: 'submit', class: 'primary', text: 'Add CA' });
  /** @type {Map<string, HTMLInputElement | HTMLTextAreaElement>} */
  let authInputs = new Map();

  function showKind() {
    const k = authKinds.find((x) => x.kind === kindSelect.value) ?? authKinds[0];
    authInputs = new Map();
    replace(authBox, h('p', { class: 'setting-doc auth-intro', id: 'ms-auth-intro', text: k.intro }), ...k.fields.map((f) => {
      const id = `ms-${k.kind}-${f.key}`;
      const attrs = { id, name: `auth.${f.key}`, autocomplete: 'off', spellcheck: 'false', placeholder: f.placeholder ?? null, required: f.required ?? false };
      const el = f.type === 'textarea' ? h('textarea', { ...attrs, rows: 3, class: f.secret ? 'secret-input' : null })
        : h('input', { ...attrs, type: f.type ?? 'text', ...(f.type === 'password' ? { autocomplete: 'new-password' } : {}) });
      authInputs.set(f.key, el);
      return field(`auth.${f.key}`, id, f.required ? `${f.label} (required)` : f.label, el, f.help);
    }), h('div', { class: 'field auth-error' }, errorEl('auth', 'ms-auth-error')));
    kindSelect.setAttribute('aria-describedby', 'ms-auth-intro ms-auth-kind-error');
  }
  kindSelect.addEventListener('change', () => { errors.clear(); showKind(); });

  const form = canAdmin ? h('form', { class: 'card inline-form msca-form', id: 'add-msca-ca', 'aria-labelledby': 'add-msca-title', novalidate: true },
    h('h2', { id: 'add-msca-title', text: 'Add AD CS CA' }),
    h('p', { class: 'setting-doc', text: 'certfleet fetches the CA\'s enrollment policy with these credentials before it stores anything: a CA that is added works, and its templates are listed at once.' }),
    h('div', { class: 'field-grid' },
      field('name', 'ms-name', 'Name (required)', nameInput, ''),
      field('default_template', 'ms-default-template', 'Default template', templateInput, 'The template an enrollment without one uses; must be in the CA\'s policy. Empty: each enrollment names its template.'),
      field('cep_url', 'ms-cep-url', 'CEP URL (required)', cepInput, 'The enrollment policy service\'s https:// .svc URL for this authentication kind. Held to msca_allow_list.'),
      field('ces_url', 'ms-ces-url', 'CES URL', cesInput, 'Empty: the enrollment service the policy names for each template and this authentication kind.'),
      field('ca_bundle_pem', 'ms-ca-bundle', 'CA bundle (PEM)', bundleInput, 'The root of the CEP\'s and CES\'s TLS certificates (usually the enterprise root), if the system store does not trust it.'),
      field('renewal_mode', 'ms-renewal-mode', 'Renewal mode', renewalSelect, 'New key: a fresh key and an ordinary request. Renew with the current key: the request signed with the current certificate\'s key, for templates that require it.')),
    h('fieldset', { class: 'auth-set' },
      h('legend', { text: 'Authentication' }),
      h('div', { class: 'field-grid' },
        h('div', { class: 'field' }, h('label', { for: 'ms-auth-kind', text: 'Kind' }), kindSelect, errorEl('auth.kind', 'ms-auth-kind-error'))),
      authBox),
    formError, h('div', { class: 'form-actions' }, addButton)) : null;
  if (form) showKind();

  const errors = fieldErrors(form, formError);

  /** The body the form sends; a field error for what the browser can tell. @returns {{body?: any, field?: string, message?: string}} */
  function formBody() {
    const k = authKinds.find((x) => x.kind === kindSelect.value) ?? authKinds[0];
    /** @type {Record<string, string>} */
    const auth = { kind: k.kind };
    for (const f of k.fields) {
      const v = authInputs.get(f.key)?.value ?? '';
      if (f.type === 'password' ? v !== '' : v.trim() !== '') auth[f.key] = f.type === 'password' || f.secret ? v : v.trim();
    }
    if (k.kind === 'kerberos') {
      // Exactly one of the two (the API refuses the same at auth.password; the browser can tell
      // before a secret is sent).
      if (auth.password !== undefined && auth.keytab_b64 !== undefined) return { field: 'auth.password', message: 'Give the password or a keytab, not both.' };
      if (auth.password === undefined && auth.keytab_b64 === undefined) return { field: 'auth.password', message: 'Give the principal\'s password or its keytab.' };
      if (auth.keytab_b64 !== undefined) auth.keytab_b64 = auth.keytab_b64.replace(/\s+/g, '');
    }
    /** @type {Record<string, unknown>} */
    const body = { name: nameInput.value.trim(), cep_url: cepInput.value.trim(), auth, renewal_mode: renewalSelect.value };
    if (cesInput.value.trim()) body.ces_url = cesInput.value.trim();
    if (bundleInput.value.trim()) body.ca_bundle_pem = bundleInput.value;
    if (templateInput.value.trim()) body.default_template = templateInput.value.trim();
    return { body };
  }

  form?.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    errors.clear();
    const built = formBody();
    if (!built.body) {
      errors.show(built.field ?? '', built.message ?? '');
      return;
    }
    addButton.disabled = true;
    addButton.textContent = 'Fetching the policy…';
    try {
      const r = await api.request('POST', api.projectPath(project, '/msca-cas'), built.body);
      const n = Array.isArray(r.body?.policy?.templates) ? r.body.policy.templates.length : 0;
      fb.ok(`AD CS CA ${r.body?.name ?? built.body.name} added: its policy lists ${n} template${n === 1 ? '' : 's'}.`);
      form.reset();
      showKind();
      void load();
    } catch (e) {
      if (e instanceof api.ApiError && e.field) errors.show(e.field, e.message);
      else formError.textContent = api.errorText(e);
    } finally {
      addButton.disabled = false;
      addButton.textContent = 'Add CA';
    }
  });

  replace(ctx.root,
    h('div', { class: 'page-head' }, h('h1', { text: 'AD CS' }),
      h('p', { class: 'muted page-intro', text: 'Microsoft Active Directory Certificate Services CAs, reached through their enrollment policy (CEP) and enrollment (CES) web services: the templates each CA\'s account may enroll, and enrollment.' })),
    fb.el,
    scrollRegion('AD CS CAs table', h('table', { id: 'msca-cas', class: 'phone-cards' },
      h('caption', { class: 'visually-hidden', text: 'AD CS CAs of this project' }),
      h('thead', null, h('tr', null, ...columns.map((c) => h('th', { scope: 'col', text: c })))),
      tbody)), state,
    cards,
    form);

  /** @param {any} ca */
  function removeButton(ca) {
    return deleteButton({ name: ca.name, path: api.projectPath(project, `/msca-cas/${ca.id}`),
      ask: { title: `Delete AD CS CA ${ca.name}?`,
        text: `${ca.name} and its sealed credentials are removed from this project. A CA that a certificate still uses cannot be deleted; nothing changes at the CA itself.`,
        confirm: 'Delete CA' },
      done: `AD CS CA ${ca.name} deleted.`, fb, reload: () => { void load(); } });
  }

  /**
   * The list row of a CA; its Policy Fetched and Templates cells change on Refresh Policy.
   * @param {any} ca
   */
  function row(ca) {
    const policy = ca.policy ?? {};
    const n = Array.isArray(policy.templates) ? policy.templates.length : 0;
    return h('tr', { 'data-id': String(ca.id), 'data-name': ca.name },
      h('td', { 'data-label': 'Name' }, h('strong', { text: ca.name })),
      h('td', { class: 'auth-cell', 'data-label': 'Authentication' }, ...authCell(ca.auth)),
      h('td', { 'data-label': 'CEP URL' }, h('code', { class: 'url' }, ...breakable(String(ca.cep_url ?? ''), '/'))),
      h('td', { 'data-label': 'Default Template' }, ca.default_template ? h('code', { text: String(ca.default_template) }) : h('span', { class: 'muted', text: 'none' })),
      h('td', { class: 'nowrap', 'data-label': 'Policy Fetched', 'data-cell': 'fetched' }, fmt.timeEl(policy.fetched_at) || '—'),
      h('td', { class: 'num', 'data-label': 'Templates', 'data-cell': 'templates', text: String(n) }),
      h('td', { class: 'actions', 'data-label': 'Actions' }, canAdmin ? removeButton(ca) : ''));
  }

  /**
   * A CA's templates: its card with Refresh Policy, and each template's Enroll form.
   * @param {any} ca
   */
  function card(ca) {
    const id = String(ca.id);
    const cardFb = feedback();
    const body = h('tbody');
    const about = h('p', { class: 'muted policy-line' });
    const title = `Templates of ${ca.name}`;
    const refresh = canOperate ? h('button', { type: 'button', 'data-action': 'refresh-policy', text: 'Refresh Policy', 'aria-label': `Refresh Policy of ${ca.name}` }) : null;

    /** @param {any} policy */
    function fill(policy) {
      const templates = Array.isArray(policy?.templates) ? policy.templates : [];
      const ces = ca.ces_url ? ['Requests go to the CES URL set on the CA: ', h('code', { class: 'url' }, ...breakable(String(ca.ces_url), '/')), '.']
        : [`Requests go to the CES a template lists for ${cesAuth[String(ca.auth?.kind)] ?? String(ca.auth?.kind ?? '')} authentication.`];
      replace(about, `Policy ${policy?.policy_id || '—'}, fetched `, fmt.timeEl(policy?.fetched_at) || 'never', '. ',
        `Renewal: ${ca.renewal_mode === 'renew_with_current' ? 'renew with the current key' : 'new key'}. `, ...ces);
      replace(body, ...templates.flatMap((/** @type {any} */ t, /** @type {number} */ i) => templateRows(ca, t, i, cardFb)));
      if (!templates.length) {
        replace(body, h('tr', null, h('td', { colspan: templateColumns.length, class: 'muted',
          text: 'The policy lists no template this account may enroll: give it Read and Enroll on the templates and publish them on the CA, then Refresh Policy.' })));
      }
    }
    fill(ca.policy);

    refresh?.addEventListener('click', async () => {
      refresh.disabled = true;
      refresh.textContent = 'Refreshing…';
      cardFb.clear();
      try {
        const policy = (await api.request('GET', api.projectPath(project, `/msca-cas/${id}/templates?refresh=1`))).body;
        if (disposed) return;
        ca.policy = policy;
        fill(policy);
        const tr = tbody.querySelector(`tr[data-id="${id}"]`);
        const fetched = tr?.querySelector('[data-cell="fetched"]');
        if (fetched) replace(fetched, fmt.timeEl(policy?.fetched_at) || '—');
        const count = tr?.querySelector('[data-cell="templates"]');
        const n = Array.isArray(policy?.templates) ? policy.templates.length : 0;
        if (count) count.textContent = String(n);
        cardFb.ok(`Policy fetched from the CA again: ${n} template${n === 1 ? '' : 's'}.`);
      } catch (e) {
        cardFb.fail(`${ca.name}: ${api.errorText(e)}`);
      } finally {
        refresh.disabled = false;
        refresh.textContent = 'Refresh Policy';
      }
    });

    return h('section', { class: 'card msca-ca-card', 'data-ca-id': id, 'aria-labelledby': `ca-${id}-title` },
      h('div', { class: 'card-head' }, h('h2', { id: `ca-${id}-title`, text: title }), refresh ? h('div', { class: 'card-tools' }, refresh) : null),
      about, cardFb.el,
      scrollRegion(`${ca.name} templates table`, h('table', { class: 'msca-templates phone-cards', 'data-ca-id': id },
        h('caption', { class: 'visually-hidden', text: title }),
        h('thead', null, h('tr', null, ...templateColumns.map((c) => h('th', { scope: 'col', text: c })))),
        body)));
  }

  /**
   * A template's row and, for an admin, its Enroll form in a row below (hidden until Enroll).
   * @param {any} ca @param {any} t @param {number} i @param {ReturnType<typeof feedback>} cardFb
   * @returns {HTMLElement[]}
   */
  function templateRows(ca, t, i, cardFb) {
    const urls = Array.isArray(t.ces_urls) ? t.ces_urls : [];
    const min = Number(t.min_key_size) || 0;
    const enroll = canAdmin ? h('button', { type: 'button', class: 'action', 'data-action': 'enroll', text: 'Enroll',
      'aria-label': `Enroll ${t.name}`, 'aria-expanded': 'false', 'aria-controls': `enroll-${ca.id}-${i}` }) : null;
    const tr = h('tr', { 'data-template': String(t.name) },
      h('td', { 'data-label': 'Template' }, h('strong', { text: String(t.name) })),
      h('td', { 'data-label': 'Display Name', text: String(t.display_name ?? '') }),
      h('td', { 'data-label': 'OID' }, h('code', { class: 'oid' }, ...breakable(String(t.oid ?? ''), '.'))),
      h('td', { class: 'nowrap', 'data-label': 'Key', text: keyLabel(t.key_algorithm) }),
      h('td', { class: 'num', 'data-label': 'Minimum Key Size', text: min ? `${min} bits` : '—' }),
      h('td', { 'data-label': 'CES URLs' }, urls.length ? h('ul', { class: 'plain-list ces-list' }, ...urls.map((/** @type {any} */ u) => h('li', null,
        h('code', { class: 'url' }, ...breakable(String(u?.url ?? u ?? ''), '/')),
        u?.authentication ? h('span', { class: 'muted ces-meta', text: `${cesAuth[String(u.authentication)] ?? String(u.authentication)}${u.renewal_only ? ', renewal only' : ''}` }) : null)))
        : h('span', { class: 'muted', text: 'none' })),
      h('td', { class: 'actions', 'data-label': 'Actions' }, enroll ?? ''));
    if (!enroll) return [tr];
    const formRow = enrollRow(ca, t, i, enroll, cardFb);
    formRow.hidden = true;
    enroll.addEventListener('click', () => {
      const show = formRow.hidden;
      formRow.hidden = !show;
      enroll.setAttribute('aria-expanded', show ? 'true' : 'false');
      if (show) formRow.querySelector('input')?.focus();
    });
    return [tr, formRow];
  }

  /**
   * The Enroll form: certificate name, subject, SANs, key type; the API's 400 at the field it
   * names; on 202 the job and the certificate, linked.
   * @param {any} ca @param {any} t @param {number} i @param {HTMLButtonElement} opener @param {ReturnType<typeof feedback>} cardFb
   */
  function enrollRow(ca, t, i, opener, cardFb) {
    const p = `enroll-${ca.id}-${i}`;
    /** @type {Record<string, {input: HTMLInputElement | HTMLTextAreaElement | HTMLSelectElement, error: HTMLElement}>} */
    const f = {};
    /** @param {string} key @param {string} label @param {HTMLInputElement | HTMLTextAreaElement | HTMLSelectElement} input @param {string} help */
    const efield = (key, label, input, help) => {
      const error = h('p', { class: 'field-error', id: `${p}-${key}-error`, 'data-field-error': key });
      input.setAttribute('aria-describedby', `${help ? `${p}-${key}-help ` : ''}${p}-${key}-error`);
      f[key] = { input, error };
      return h('div', { class: 'field' }, h('label', { for: input.id, text: label }), input,
        help ? h('p', { class: 'setting-doc', id: `${p}-${key}-help`, text: help }) : null, error);
    };
    const name = h('input', { id: `${p}-name`, name: 'name', type: 'text', autocomplete: 'off', spellcheck: 'false', required: true, placeholder: 'web01' });
    const subject = h('input', { id: `${p}-subject`, name: 'subject', type: 'text', autocomplete: 'off', spellcheck: 'false', placeholder: 'CN=web01.corp.example' });
    const sans = h('textarea', { id: `${p}-sans`, name: 'sans', rows: 2, spellcheck: 'false', placeholder: 'web01.corp.example' });
    const types = keyTypesFor(t);
    const keyType = h('select', { id: `${p}-key-type`, name: 'key_type' },
      h('option', { value: '', text: `The template's (${types[0] ?? 'its default'})` }), ...types.map((k) => h('option', { value: k, text: k })));
    const formError = h('p', { class: 'field-error', role: 'alert' });
    const submit = h('button', { type: 'submit', class: 'primary', text: 'Enroll', 'aria-label': `Enroll with ${t.name}` });
    const cancel = h('button', { type: 'button', text: 'Cancel' });
    const eform = h('form', { class: 'enroll-form', 'data-enroll-for': String(t.name), 'aria-label': `Enroll with ${t.name} at ${ca.name}`, novalidate: true },
      h('p', { class: 'setting-doc', text: `certfleet makes the key, sends the request for ${t.name} to ${ca.name} and stores what the CA issues; it renews the certificate in the last third of its lifetime. A subject, DNS names, or both.` }),
      h('div', { class: 'field-grid enroll-fields' },
        efield('name', 'Certificate name (required)', name, ''),
        efield('subject', 'Subject', subject, 'An RFC 4514 name: CN=web01.corp.example,O=Corp.'),
        efield('sans', 'SANs', sans, 'DNS names, one per line.'),
        efield('key_type', 'Key type', keyType, `What ${t.name} accepts (${keyLabel(t.key_algorithm)}${Number(t.min_key_size) ? `, at least ${t.min_key_size} bits` : ''}).`)),
      formError, h('div', { class: 'form-actions' }, cancel, submit));
    const row = h('tr', { class: 'detail-row enroll-row', id: p, 'data-enroll-row': String(t.name) },
      h('td', { class: 'form-cell', colspan: templateColumns.length }, eform));
    cancel.addEventListener('click', () => {
      row.hidden = true;
      opener.setAttribute('aria-expanded', 'false');
      opener.focus();
    });
    eform.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      for (const x of Object.values(f)) { x.error.textContent = ''; x.input.removeAttribute('aria-invalid'); }
      formError.textContent = '';
      /** @type {Record<string, unknown>} */
      const body = { name: name.value.trim(), msca_ca_id: String(ca.id), template: String(t.name) };
      if (subject.value.trim()) body.subject = subject.value.trim();
      const names = sans.value.split(/[\s,]+/).map((s) => s.trim()).filter(Boolean);
      if (names.length) body.sans = names;
      if (keyType.value) body.key_type = keyType.value;
      submit.disabled = true;
      try {
        const r = await api.post(api.projectPath(project, '/certificates/enroll'), body);
        const certId = String(r.body?.certificate_id ?? '');
        const jobId = String(r.body?.job_id ?? '');
        cardFb.ok(`Certificate `, h('a', { href: href(`/certificates/${certId}`, { project }), 'data-certificate-id': certId, text: String(body.name) }),
          ` is being enrolled with ${t.name}: `, h('a', { href: href(`/jobs/${jobId}`, { project }), 'data-job-id': jobId, text: `job ${jobId}` }));
        eform.reset();
        row.hidden = true;
        opener.setAttribute('aria-expanded', 'false');
        opener.focus();
      } catch (e) {
        const key = e instanceof api.ApiError && e.field ? e.field.replace(/[.[].*$/, '') : '';
        const target = key ? f[key] : undefined;
        if (target) {
          target.error.textContent = api.errorText(e);
          target.input.setAttribute('aria-invalid', 'true');
          target.input.focus();
        } else {
          formError.textContent = e instanceof api.ApiError && e.field ? `${e.field}: ${e.message}` : api.errorText(e);
        }
      } finally {
        submit.disabled = false;
      }
    });
    return row;
  }

  async function load() {
    try {
      const items = await allPages(api.projectPath(project, '/msca-cas'), 2000);
      if (disposed) return;
      replace(tbody, ...items.map((ca) => row(ca)));
      replace(cards, ...items.map((ca) => card(ca)));
      state.className = 'muted empty-state';
      state.setAttribute('role', 'status');
      state.textContent = items.length ? '' : `No AD CS CAs in this project.${canAdmin ? ' Add one below with the CEP URL and an account that may enroll.' : ' An admin can add one.'}`;
    } catch (e) {
      if (!disposed) showAlert(state, api.errorText(e));
    }
  }
  void load();
  return { refresh() { void load(); }, dispose() { disposed = true; } };
}
