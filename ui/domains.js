// Domains: the registered domains whose registration expiry certfleet watches (the hourly
// domain_expiration_check job: RDAP first, WHOIS when RDAP cannot answer). Each row: Name, State,
// Expires, Registrar, Source, Last Checked, Last Error; a row's Details show its statuses and the
// server that answered. Check now (operator+), Add domain and Delete (admin+).
import * as api from './api.js';
import { h, replace, showAlert } from './dom.js';
import { feedback, fillPager, pageCount, scrollRegion } from './widgets.js';
import * as fmt from './format.js';
import { href } from './router.js';
import * as session from './session.js';

const sourceLabels = /** @type {Record<string, string>} */ ({ rdap: 'RDAP', whois: 'WHOIS' });
const stateTitles = /** @type {Record<string, string>} */ ({
  ok: 'registered, not near its expiry',
  expiring: 'a threshold of domain_expiry_thresholds_days was crossed at the last lookup: renew the registration',
  error: 'no lookup has succeeded yet: see Last Error',
  unknown: 'never looked up yet: Check now, or wait for the hourly check',
});

/** @param {string} state */
export function domainStateTag(state) {
  const s = state.replace(/[^a-z]/g, '') || 'unknown';
  return h('span', { class: `tag domain-${s}`, 'data-state': s, title: stateTitles[s] ?? '', text: s });
}

/**
 * The expiry date and "in N days" / "N days ago".
 * @param {string | null | undefined} expiresAt
 */
export function domainExpiry(expiresAt) {
  if (!expiresAt) return h('span', { class: 'muted', text: '—' });
  const days = fmt.daysLeft(expiresAt);
  const cls = days === null ? '' : days < 0 ? 'expired' : days < 30 ? 'soon' : 'ok';
  return h('span', { class: `expiry ${cls}`, title: fmt.time(expiresAt) }, expiresAt.slice(0, 10), ' ',
    h('span', { class: 'days-left', text: `(${fmt.relativeDays(expiresAt)})` }));
}

/** @param {import('./router.js').PageContext} ctx @returns {import('./router.js').PageHandle} */
export function renderDomains(ctx) {
  const { project, query } = ctx;
  const page = Math.max(1, Number.parseInt(query.get('page') ?? '1', 10) || 1);
  const canCheck = session.hasRole('operator');
  const canAdmin = session.hasRole('admin');
  const fb = feedback();
  let disposed = false;
  /** @type {Set<string>} ids whose Details are open (kept across refreshes) */
  const open = new Set();
  const tbody = h('tbody');
  const state = h('p', { class: 'muted', role: 'status', text: 'Loading…' });
  const pager = h('nav', { class: 'pager', 'aria-label': 'Pages' });
  const columns = ['Name', 'State', 'Expires', 'Registrar', 'Source', 'Last Checked', 'Last Error', 'Actions'];

  // Add domain (admin and above): the API's message next to the field it names.
  const nameInput = h('input', { id: 'domain-name', name: 'name', type: 'text', placeholder: 'example.com', autocomplete: 'off',
    spellcheck: 'false', required: true, 'aria-describedby': 'domain-name-hint domain-name-error' });
  const nameError = h('p', { class: 'field-error', id: 'domain-name-error', 'data-field-error': 'name' });
  const formError = h('p', { class: 'field-error', id: 'domain-form-error', role: 'alert' });
  const addButton = h('button', { type: 'submit', class: 'primary', text: 'Add domain' });
  const form = canAdmin ? h('form', { class: 'card inline-form', id: 'add-domain', 'aria-labelledby': 'add-domain-title', novalidate: true },
    h('h2', { id: 'add-domain-title', text: 'Add domain' }),
    h('div', { class: 'form-row' },
      h('label', { for: 'domain-name', text: 'Domain name' }), nameInput, addButton),
    h('p', { class: 'setting-doc', id: 'domain-name-hint', text: 'A registered domain such as example.com (not a host name like www.example.com; IDNs in their xn-- form). It is looked up at the next hourly check, or now with Check now.' }),
    nameError, formError) : null;

  form?.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    nameError.textContent = '';
    formError.textContent = '';
    nameInput.removeAttribute('aria-invalid');
    addButton.disabled = true;
    try {
      const r = await api.post(api.projectPath(project, '/domains'), { name: nameInput.value.trim() });
      fb.ok(`Watching ${r.body?.name ?? nameInput.value.trim()}. Press Check now to look it up.`);
      nameInput.value = '';
      void load();
    } catch (e) {
      if (e instanceof api.ApiError && (e.field === 'name' || e.status === 409)) {
        nameError.textContent = e.message;
        nameInput.setAttribute('aria-invalid', 'true');
        nameInput.focus();
      } else {
        formError.textContent = api.errorText(e);
      }
    } finally {
      addButton.disabled = false;
    }
  });

  replace(ctx.root,
    h('div', { class: 'page-head' }, h('h1', { text: 'Domains' }),
      h('p', { class: 'muted page-intro', text: 'Registered domains whose registration expiry certfleet looks up every hour (RDAP, WHOIS when RDAP cannot answer).' })),
    fb.el,
    form,
    scrollRegion('Domains', h('table', { id: 'domains' },
      h('caption', { class: 'visually-hidden', text: 'Watched domains' }),
      h('thead', null, h('tr', null, ...columns.map((c) => h('th', { scope: 'col', text: c })))),
      tbody)), state, pager);

  /** @param {any} d */
  function checkButton(d) {
    const b = h('button', { type: 'button', class: 'action', 'data-action': 'check', text: 'Check now', 'aria-label': `Check now: ${d.name}` });
    b.addEventListener('click', async () => {
      b.disabled = true;
      try {
        const r = await api.post(api.projectPath(project, `/domains/${d.id}/check`));
        const jobId = String(r.body?.job_id ?? '');
        fb.ok(r.body?.created === false ? `${d.name}: a check from this minute is already queued: ` : `${d.name}: check queued: `,
          h('a', { href: href(`/jobs/${jobId}`, { project }), 'data-job-id': jobId, text: `job ${jobId}` }));
      } catch (e) {
        fb.fail(`${d.name}: ${api.errorText(e)}`);
      } finally {
        b.disabled = false;
      }
    });
    return b;
  }

  /** @param {any} d @param {HTMLElement} cell */
  function deleteButton(d, cell) {
    const b = h('button', { type: 'button', class: 'action danger', 'data-action': 'delete', text: 'Delete', 'aria-label': `Delete ${d.name}` });
    b.addEventListener('click', () => {
      // Confirmation in place: the question and two buttons replace the row's actions.
      const keep = [...cell.childNodes];
      const yes = h('button', { type: 'button', class: 'action danger', 'data-action': 'confirm-delete', text: 'Yes, delete', 'aria-label': `Yes, delete ${d.name}` });
      const no = h('button', { type: 'button', class: 'action', 'data-action': 'cancel-delete', text: 'Keep' });
      no.addEventListener('click', () => { replace(cell, ...keep); b.focus(); });
      yes.addEventListener('click', async () => {
        yes.disabled = true;
        no.disabled = true;
        try {
          await api.del(api.projectPath(project, `/domains/${d.id}`));
          fb.ok(`${d.name} is no longer watched.`);
          void load();
        } catch (e) {
          fb.fail(`${d.name}: ${api.errorText(e)}`);
          replace(cell, ...keep);
        }
      });
      replace(cell, h('span', { class: 'confirm-text', text: `Stop watching ${d.name}?` }), ' ', yes, ' ', no);
      no.focus();
    });
    return b;
  }

  /** @param {any} d */
  function detailRow(d) {
    const statuses = Array.isArray(d.statuses) ? d.statuses : [];
    /** @param {string} term @param {Node | string} value */
    const item = (term, value) => [h('dt', { text: term }), h('dd', null, value === '' ? '—' : value)];
    return h('tr', { class: 'detail-row', id: `domain-detail-${d.id}`, 'data-detail-for': d.id },
      h('td', { colspan: columns.length },
        h('dl', { class: 'summary' },
          ...item('Statuses', statuses.length ? h('ul', { class: 'status-list' }, ...statuses.map((/** @type {unknown} */ s) => h('li', null, h('code', { text: String(s) })))) : 'none reported'),
          ...item('Answered by', d.server ? h('code', { class: 'break', text: `${sourceLabels[d.source] ?? d.source ?? ''} ${d.server}` }) : ''),
          ...item('Expires', d.expires_at ? fmt.timeEl(d.expires_at) : ''),
          ...item('Watched since', fmt.timeEl(d.created_at)),
          ...item('Last Error', d.last_error ? h('pre', { class: 'error-text error-block', text: String(d.last_error) }) : ''))));
  }

  /** @param {any} d */
  function rows(d) {
    const id = String(d.id);
    const toggle = h('button', { type: 'button', class: 'link-button details-toggle', 'aria-expanded': open.has(id) ? 'true' : 'false',
      'aria-controls': `domain-detail-${id}`, text: 'Details', 'aria-label': `Details of ${d.name}` });
    const actions = h('td', { class: 'actions' });
    replace(actions, toggle, canCheck ? [' ', checkButton(d)] : [], canAdmin ? [' ', deleteButton(d, actions)] : []);
    const detail = detailRow(d);
    detail.hidden = !open.has(id);
    toggle.addEventListener('click', () => {
      const show = detail.hidden;
      detail.hidden = !show;
      toggle.setAttribute('aria-expanded', show ? 'true' : 'false');
      if (show) open.add(id); else open.delete(id);
    });
    const err = d.last_error ? String(d.last_error) : '';
    return [h('tr', { 'data-id': id, 'data-name': d.name },
      h('td', null, h('strong', { text: d.name })),
      h('td', null, domainStateTag(String(d.state ?? 'unknown'))),
      h('td', null, domainExpiry(d.expires_at)),
      h('td', { text: d.registrar ?? '' }),
      h('td', { text: d.source ? (sourceLabels[d.source] ?? String(d.source)) : '' }),
      h('td', null, d.checked_at ? fmt.timeEl(d.checked_at) : h('span', { class: 'muted', text: 'never' })),
      h('td', { class: 'last-error' }, err ? h('span', { class: 'error-text truncate', title: err, text: err }) : ''),
      actions), detail];
  }

  async function load() {
    try {
      const r = await api.get(api.projectPath(project, `/domains?page=${page}`));
      if (disposed) return;
      const items = Array.isArray(r.items) ? r.items : [];
      replace(tbody, ...items.flatMap((/** @type {any} */ d) => rows(d)));
      state.className = 'muted empty-state';
      state.setAttribute('role', 'status');
      state.textContent = items.length ? '' : 'No domains are watched in this project. A watched domain is looked up every hour in '
        + 'its registry (RDAP, else WHOIS) and a domain.expiring notification goes out as its registration nears expiry, '
        + `so a lapsed domain does not take its certificates and services down with it.${canAdmin ? ' Add one above.' : ' An admin can add one.'}`;
      fillPager(pager, page, pageCount(r), (/** @type {number} */ n) => href('/domains', { project, page: n }));
    } catch (e) {
      if (!disposed) showAlert(state, api.errorText(e));
    }
  }
  void load();
  return { refresh() { void load(); }, dispose() { disposed = true; } };
}
