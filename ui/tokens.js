// Tokens (admin and above): the project's API tokens with their role, expiry and last use; Create
// token (a role up to the signed-in token's own, an expiry) shows the new token's text once, with
// Copy; Revoke asks first. Rotation is create, switch the client over, then revoke the old one.
import * as api from './api.js';
import { h, replace, showAlert } from './dom.js';
import { confirmAction, feedback, scrollRegion } from './widgets.js';
import * as fmt from './format.js';
import * as session from './session.js';

/** @typedef {'viewer' | 'operator' | 'admin' | 'owner'} Role */
const roles = /** @type {Role[]} */ (['viewer', 'operator', 'admin', 'owner']);
const roleDocs = /** @type {Record<Role, string>} */ ({
  viewer: 'reads jobs, logs and objects',
  operator: '+ runs distributions, renews, checks',
  admin: '+ creates and deletes objects, retries and cancels jobs, manages tokens',
  owner: '+ owner tokens',
});
/** The expiry choices: seconds (0: never). Absent in the API: 90 days. */
const lifetimes = [
  { label: '1 day', s: 86400 },
  { label: '7 days', s: 7 * 86400 },
  { label: '30 days', s: 30 * 86400 },
  { label: '90 days', s: 90 * 86400 },
  { label: '1 year', s: 365 * 86400 },
  { label: 'Never expires', s: 0 },
];
const statusTitles = /** @type {Record<string, string>} */ ({
  active: 'accepted by the API',
  expired: 'refused since its expiry; deleted by the retention sweep after job_retention_s',
  revoked: 'refused since it was revoked',
});

/** @param {string} status */
export function tokenStatusTag(status) {
  const s = status.replace(/[^a-z]/g, '') || 'active';
  return h('span', { class: `tag token-${s}`, 'data-status': s, title: statusTitles[s] ?? '', text: s });
}

/** The roles the signed-in token may give: up to its own (a system admin: any). */
export function grantableRoles() {
  return roles.filter((r) => session.hasRole(r));
}

/** @param {import('./router.js').PageContext} ctx @returns {import('./router.js').PageHandle} */
export function renderTokens(ctx) {
  const { project } = ctx;
  const fb = feedback();
  let disposed = false;
  const columns = ['Name', 'Role', 'Status', 'Expires', 'Last Used', 'Created', 'Created By', 'Actions'];
  const tbody = h('tbody');
  const state = h('p', { class: 'muted', role: 'status', text: 'Loading…' });
  const me = session.session();

  if (!session.hasRole('admin')) {
    replace(ctx.root, h('div', { class: 'page-head' }, h('h1', { text: 'Tokens' })),
      h('p', { class: 'alert error', role: 'alert', text: 'Tokens are managed by an admin of this project: this sign-in has the '
        + `${me?.role ?? 'viewer'} role.` }));
    return { refresh() {}, dispose() {} };
  }

  // Create token: name, role (up to this sign-in's own), expiry. The API's message goes next to the
  // field it names.
  const nameInput = h('input', { id: 'token-name', name: 'name', type: 'text', placeholder: 'ci-deploy', autocomplete: 'off',
    spellcheck: 'false', required: true, maxlength: '100', 'aria-describedby': 'token-name-hint token-name-error' });
  const roleSelect = h('select', { id: 'token-role', name: 'role', 'aria-describedby': 'token-role-hint token-role-error' },
    ...grantableRoles().map((r) => h('option', { value: r, text: `${r} — ${roleDocs[r]}` })));
  const ttlSelect = h('select', { id: 'token-ttl', name: 'ttl_s', 'aria-describedby': 'token-ttl-hint token-ttl-error' },
    ...lifetimes.map((l) => h('option', { value: String(l.s), text: l.label, selected: l.s === 90 * 86400 })));
  /** @type {Record<string, HTMLElement>} */
  const errors = {
    name: h('p', { class: 'field-error', id: 'token-name-error', 'data-field-error': 'name' }),
    role: h('p', { class: 'field-error', id: 'token-role-error', 'data-field-error': 'role' }),
    ttl_s: h('p', { class: 'field-error', id: 'token-ttl-error', 'data-field-error': 'ttl_s' }),
  };
  /** @type {Record<string, HTMLElement>} */
  const inputs = { name: nameInput, role: roleSelect, ttl_s: ttlSelect };
  const formError = h('p', { class: 'field-error', id: 'token-form-error', role: 'alert' });
  const createButton = h('button', { type: 'submit', class: 'primary', text: 'Create token' });
  // The new token's text: shown here once, never again (only its hash is stored).
  const created = h('div', { class: 'token-once', id: 'token-created', hidden: true, role: 'region', 'aria-label': 'New token' });
  const form = h('form', { class: 'card inline-form', id: 'create-token', 'aria-labelledby': 'create-token-title', novalidate: true },
    h('h2', { id: 'create-token-title', text: 'Create token' }),
    h('div', { class: 'field-grid token-fields' },
      h('div', { class: 'field' }, h('label', { for: 'token-name', text: 'Name (required)' }), nameInput,
        h('p', { class: 'setting-doc', id: 'token-name-hint', text: 'What it is for, so whoever reads this list later knows whether it may go.' }), errors.name),
      h('div', { class: 'field' }, h('label', { for: 'token-role', text: 'Role' }), roleSelect,
        h('p', { class: 'setting-doc', id: 'token-role-hint', text: 'Up to your own role. Give the least that does the job.' }), errors.role),
      h('div', { class: 'field' }, h('label', { for: 'token-ttl', text: 'Expires' }), ttlSelect,
        h('p', { class: 'setting-doc', id: 'token-ttl-hint', text: 'After this it is refused. No later than the token you signed in with expires.' }), errors.ttl_s)),
    h('div', { class: 'form-actions' }, createButton),
    formError, created);

  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    for (const [k, el] of Object.entries(errors)) { el.textContent = ''; inputs[k]?.removeAttribute('aria-invalid'); }
    formError.textContent = '';
    created.hidden = true;
    createButton.disabled = true;
    const name = nameInput.value.trim();
    try {
      const r = await api.post(api.projectPath(project, '/tokens'),
        { name, role: roleSelect.value, ttl_s: Number(ttlSelect.value) });
      showCreated(r.body);
      nameInput.value = '';
      fb.ok(`Token ${name} created. Copy it now: it is not shown again.`);
      void load();
    } catch (e) {
      const field = e instanceof api.ApiError ? e.field ?? '' : '';
      if (field && errors[field]) {
        errors[field].textContent = api.errorText(e);
        inputs[field]?.setAttribute('aria-invalid', 'true');
        inputs[field]?.focus();
      } else {
        formError.textContent = api.errorText(e);
      }
    } finally {
      createButton.disabled = false;
    }
  });

  /** @param {any} t */
  function showCreated(t) {
    const text = String(t?.token ?? '');
    const value = h('code', { class: 'token-text break', id: 'token-created-text', text });
    const copy = h('button', { type: 'button', class: 'action', 'data-action': 'copy', text: 'Copy' });
    copy.addEventListener('click', async () => {
      try {
        await navigator.clipboard.writeText(text);
        copy.textContent = 'Copied';
      } catch {
        // No clipboard (plain HTTP or a refused permission): select it for Ctrl+C instead.
        const range = document.createRange();
        range.selectNodeContents(value);
        const sel = window.getSelection();
        sel?.removeAllRanges();
        sel?.addRange(range);
        copy.textContent = 'Selected: press Ctrl+C';
      }
    });
    const dismiss = h('button', { type: 'button', class: 'action', 'data-action': 'dismiss', text: 'I have stored it' });
    dismiss.addEventListener('click', () => { replace(created); created.hidden = true; nameInput.focus(); });
    replace(created,
      h('p', null, h('strong', { text: `${t?.name ?? 'Token'} (${t?.role ?? ''}${t?.expires_at ? `, expires ${fmt.time(t.expires_at)}` : ', never expires'})` })),
      h('p', { class: 'setting-doc', text: 'This is the only time the token is shown. Store it in your secret manager now; if it is lost, create another and revoke this one.' }),
      h('div', { class: 'token-once-row' }, value, copy, dismiss));
    created.hidden = false;
    copy.focus();
  }

  /** @param {any} t */
  function revokeButton(t) {
    const b = h('button', { type: 'button', class: 'action danger', 'data-action': 'revoke', text: 'Revoke', 'aria-label': `Revoke ${t.name}` });
    b.addEventListener('click', async () => {
      const self = me?.token_name === t.name && !me?.system;
      const ok = await confirmAction({
        title: `Revoke token ${t.name}?`,
        text: `Every client using it is refused from now on${self ? ', and this may be the token you signed in with: you would be signed out' : ''}. This cannot be undone.`,
        confirm: 'Revoke token',
      });
      if (!ok) return;
      b.disabled = true;
      try {
        await api.del(api.projectPath(project, `/tokens/${t.id}`));
        fb.ok(`Token ${t.name} is revoked.`);
        void load();
      } catch (e) {
        fb.fail(`${t.name}: ${api.errorText(e)}`);
        b.disabled = false;
      }
    });
    return b;
  }

  /**
   * "token:<id>" as the name of that token when it is in this list (its id in the title).
   * @param {string} by @param {Map<string, string>} names
   */
  function creator(by, names) {
    const id = by.startsWith('token:') ? by.slice(6) : '';
    const name = id ? names.get(id) : undefined;
    return name !== undefined ? h('span', { title: by, 'data-created-by': by, text: name || '(no name)' })
      : h('span', { class: 'break', 'data-created-by': by, text: by });
  }

  /** @param {any} t @param {Map<string, string>} names */
  function row(t, names) {
    const when = (/** @type {string | null | undefined} */ v, /** @type {string} */ none) =>
      v ? fmt.timeEl(v) : h('span', { class: 'muted', text: none });
    const mayRevoke = t.status === 'active' && !t.system && session.hasRole(t.role);
    return h('tr', { 'data-id': t.id, 'data-name': t.name },
      h('td', { 'data-label': 'Name' }, h('strong', { text: t.name || '(no name)' }), t.system ? [' ', h('span', { class: 'tag', text: 'system' })] : []),
      h('td', { 'data-label': 'Role', text: t.role }),
      h('td', { 'data-label': 'Status' }, tokenStatusTag(String(t.status))),
      h('td', { 'data-label': 'Expires' }, when(t.expires_at, 'never')),
      h('td', { 'data-label': 'Last Used' }, when(t.last_used_at, 'never used')),
      h('td', { 'data-label': 'Created' }, fmt.timeEl(t.created_at)),
      h('td', { 'data-label': 'Created By' }, creator(String(t.created_by ?? ''), names)),
      h('td', { class: 'actions', 'data-label': 'Actions' }, mayRevoke ? revokeButton(t) : ''));
  }

  replace(ctx.root,
    h('div', { class: 'page-head' }, h('h1', { text: 'Tokens' }),
      h('p', { class: 'muted page-intro', text: 'API tokens of this project: what scripts, CI and the CLI sign in with. Last Used is kept to the minute.' })),
    fb.el,
    form,
    scrollRegion('Tokens', h('table', { id: 'tokens', class: 'phone-cards' },
      h('caption', { class: 'visually-hidden', text: 'Tokens of this project' }),
      h('thead', null, h('tr', null, ...columns.map((c) => h('th', { scope: 'col', text: c })))),
      tbody)), state);

  async function load() {
    try {
      const r = await api.get(api.projectPath(project, '/tokens'));
      if (disposed) return;
      const items = Array.isArray(r.items) ? r.items : [];
      const names = new Map(items.map((/** @type {any} */ t) => [String(t.id), String(t.name ?? '')]));
      replace(tbody, ...items.map((/** @type {any} */ t) => row(t, names)));
      state.className = 'muted empty-state';
      state.textContent = items.length ? '' : 'No tokens in this project yet. Create one above.';
    } catch (e) {
      if (!disposed) showAlert(state, api.errorText(e));
    }
  }
  void load();
  return { refresh() { void load(); }, dispose() { disposed = true; } };
}
