// A paged list of one kind of catalog object (certificates, distributions): its title, its
// columns, one row per object (a click opens the object), "Page N of M" and the API's error.
import * as api from './api.js';
import { h, openOnClick, replace, showAlert } from './dom.js';
import { fillPager, pageCount, scrollRegion } from './widgets.js';
import { href, navigate } from './router.js';

/**
 * @typedef {object} CatalogListSpec
 * @property {string} title        the page's heading, e.g. "Certificates"
 * @property {string} path         the UI path of the list, e.g. "/certificates"; objects are at PATH/{id}
 * @property {string} apiPath      the project's API path, e.g. "/certificates"
 * @property {string[]} columns
 * @property {string} empty        what an empty list says
 * @property {(item: any, link: string, extra: any) => Array<HTMLElement>} cells  the row's cells
 * @property {(project: string) => Promise<any>} [extra]  read beside the page (e.g. certificate names)
 */

/**
 * @param {import('./router.js').PageContext} ctx
 * @param {CatalogListSpec} spec
 * @returns {import('./router.js').PageHandle}
 */
export function renderCatalogList(ctx, spec) {
  const { project, query } = ctx;
  const page = Math.max(1, Number.parseInt(query.get('page') ?? '1', 10) || 1);
  let disposed = false;
  const tbody = h('tbody');
  const state = h('p', { class: 'muted', role: 'status', text: 'Loading…' });
  const pager = h('nav', { class: 'pager', 'aria-label': 'Pages' });
  replace(ctx.root,
    h('div', { class: 'page-head' }, h('h1', { text: spec.title })),
    scrollRegion(spec.title, h('table', null,
      h('caption', { class: 'visually-hidden', text: spec.title }),
      h('thead', null, h('tr', null, ...spec.columns.map((c) => h('th', { scope: 'col', text: c })))),
      tbody)), state, pager);

  async function load() {
    try {
      const [r, extra] = await Promise.all([
        api.get(api.projectPath(project, `${spec.apiPath}?page=${page}`)), spec.extra ? spec.extra(project) : null]);
      if (disposed) return;
      const items = Array.isArray(r.items) ? r.items : [];
      replace(tbody, ...items.map((/** @type {any} */ item) => {
        const link = href(`${spec.path}/${item.id}`, { project });
        return openOnClick(h('tr', { class: 'click-row', 'data-id': item.id }, ...spec.cells(item, link, extra)), link, navigate);
      }));
      state.textContent = items.length ? '' : spec.empty;
      fillPager(pager, page, pageCount(r), (/** @type {number} */ n) => href(spec.path, { project, page: n }));
    } catch (e) {
      if (!disposed) showAlert(state, api.errorText(e));
    }
  }
  void load();
  return { refresh() { void load(); }, dispose() { disposed = true; } };
}
