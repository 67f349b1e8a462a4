// The Certificates list: name, subject, SANs, not_after with days left, fingerprint.
import * as api from './api.js';
import { h, openOnClick, pagerLinks, replace } from './dom.js';
import * as fmt from './format.js';
import { href, navigate } from './router.js';

/** @param {string} notAfter */
export function expiry(notAfter) {
  const days = fmt.daysLeft(notAfter);
  const cls = days === null ? '' : days < 0 ? 'expired' : days < 30 ? 'soon' : 'ok';
  return h('span', { class: `expiry ${cls}` }, notAfter.slice(0, 10), ' ',
    h('span', { class: 'days-left', text: days === null ? '' : days < 0 ? `(expired ${-days} d ago)` : `(${days} d left)` }));
}

/** @param {string} fp */
export function shortFingerprint(fp) { return fp.length > 16 ? `${fp.slice(0, 16)}…` : fp; }

/** @param {import('./router.js').PageContext} ctx @returns {import('./router.js').PageHandle} */
export function renderCertificates(ctx) {
  const { project, query } = ctx;
  const page = Math.max(1, Number.parseInt(query.get('page') ?? '1', 10) || 1);
  let disposed = false;
  const tbody = h('tbody');
  const state = h('p', { class: 'muted', role: 'status', text: 'Loading…' });
  const pager = h('nav', { class: 'pager', 'aria-label': 'Pages' });
  replace(ctx.root,
    h('div', { class: 'page-head' }, h('h1', { text: 'Certificates' })),
    h('div', { class: 'table-wrap' }, h('table', null,
      h('caption', { class: 'visually-hidden', text: 'Certificates' }),
      h('thead', null, h('tr', null, ...['Name', 'Subject', 'SANs', 'Not After', 'Fingerprint'].map((c) => h('th', { scope: 'col', text: c })))),
      tbody)), state, pager);

  async function load() {
    try {
      const r = await api.get(api.projectPath(project, `/certificates?page=${page}`));
      if (disposed) return;
      const items = Array.isArray(r.items) ? r.items : [];
      replace(tbody, ...items.map((/** @type {any} */ c) => {
        const link = href(`/certificates/${c.id}`, { project });
        const tr = h('tr', { class: 'click-row', 'data-id': c.id },
          h('td', null, h('a', { href: link, text: c.name })),
          h('td', { text: c.subject ?? '' }),
          h('td', { text: Array.isArray(c.sans) ? c.sans.join(', ') : '' }),
          h('td', null, c.not_after ? expiry(String(c.not_after)) : ''),
          h('td', null, h('code', { title: c.fingerprint_sha256 ?? '', text: shortFingerprint(String(c.fingerprint_sha256 ?? '')) })));
        return openOnClick(tr, link, navigate);
      }));
      state.textContent = items.length ? '' : 'No certificates in this project.';
      const pages = Math.max(1, Math.ceil((r.total ?? 0) / (r.page_size || 1)));
      replace(pager, ...pagerLinks(page, pages, (n) => href('/certificates', { project, page: n })));
    } catch (e) {
      if (!disposed) { state.className = 'alert error'; state.setAttribute('role', 'alert'); state.textContent = api.errorText(e); }
    }
  }
  void load();
  return { refresh() { void load(); }, dispose() { disposed = true; } };
}
