// The Distributions list.
import * as api from './api.js';
import { certificateNames } from './catalog.js';
import { h, openOnClick, pagerLinks, replace } from './dom.js';
import * as fmt from './format.js';
import { href, navigate } from './router.js';

/** @param {import('./router.js').PageContext} ctx @returns {import('./router.js').PageHandle} */
export function renderDistributions(ctx) {
  const { project, query } = ctx;
  const page = Math.max(1, Number.parseInt(query.get('page') ?? '1', 10) || 1);
  let disposed = false;
  const tbody = h('tbody');
  const state = h('p', { class: 'muted', role: 'status', text: 'Loading…' });
  const pager = h('nav', { class: 'pager', 'aria-label': 'Pages' });
  replace(ctx.root,
    h('div', { class: 'page-head' }, h('h1', { text: 'Distributions' })),
    h('div', { class: 'table-wrap' }, h('table', null,
      h('caption', { class: 'visually-hidden', text: 'Distributions' }),
      h('thead', null, h('tr', null, ...['Name', 'Status', 'Run', 'Mode', 'Certificate', 'Targets', 'Updated'].map((c) => h('th', { scope: 'col', text: c })))),
      tbody)), state, pager);

  async function load() {
    try {
      const [r, certs] = await Promise.all([
        api.get(api.projectPath(project, `/distributions?page=${page}`)), certificateNames(project)]);
      if (disposed) return;
      const items = Array.isArray(r.items) ? r.items : [];
      replace(tbody, ...items.map((/** @type {any} */ d) => {
        const link = href(`/distributions/${d.id}`, { project });
        const tr = h('tr', { class: 'click-row', 'data-id': d.id },
          h('td', null, h('a', { href: link, text: d.name })),
          h('td', null, fmt.outcomeTag(String(d.status))),
          h('td', { class: 'num', text: String(d.run_no ?? 0) }),
          h('td', { text: d.mode ?? '' }),
          h('td', null, d.certificate_id ? h('a', { href: href(`/certificates/${d.certificate_id}`, { project }), text: certs.get(d.certificate_id) ?? d.certificate_id.slice(0, 8) }) : ''),
          h('td', { class: 'num', text: String(Array.isArray(d.target_ids) ? d.target_ids.length : '') }),
          h('td', null, fmt.timeEl(d.updated_at)));
        return openOnClick(tr, link, navigate);
      }));
      state.textContent = items.length ? '' : 'No distributions in this project.';
      const pages = Math.max(1, Math.ceil((r.total ?? 0) / (r.page_size || 1)));
      replace(pager, ...pagerLinks(page, pages, (n) => href('/distributions', { project, page: n })));
    } catch (e) {
      if (!disposed) { state.className = 'alert error'; state.setAttribute('role', 'alert'); state.textContent = api.errorText(e); }
    }
  }
  void load();
  return { refresh() { void load(); }, dispose() { disposed = true; } };
}
