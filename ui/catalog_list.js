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
 * @property {(item: any) => boolean} [selectable]  rows this caller may select (a checkbox first);
 *           absent: no selection column
 * @property {(list: CatalogListTools) => HTMLElement} [tools]  beside the heading (actions on the list)
 */

/**
 * What a list's tools see: the ids selected on this page (and a call when that changes), and a
 * reload of the page.
 * @typedef {object} CatalogListTools
 * @property {() => string[]} selected
 * @property {(fn: () => void) => void} onSelect
 * @property {() => void} reload
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
  /** @type {Set<string>} */
  const selected = new Set();
  /** @type {Array<() => void>} */
  const selectWatchers = [];
  const selectChanged = () => { for (const fn of selectWatchers) fn(); };
  const tools = spec.tools ? spec.tools({
    selected: () => [...selected],
    onSelect: (fn) => { selectWatchers.push(fn); },
    reload: () => { void load(); },
  }) : null;
  const heads = [...(spec.selectable ? [h('th', { scope: 'col' }, h('span', { class: 'visually-hidden', text: 'Select' }))] : []),
    ...spec.columns.map((c) => h('th', { scope: 'col', text: c }))];
  replace(ctx.root,
    h('div', { class: 'page-head' }, h('h1', { text: spec.title }), tools),
    scrollRegion(spec.title, h('table', null,
      h('caption', { class: 'visually-hidden', text: spec.title }),
      h('thead', null, h('tr', null, ...heads)),
      tbody)), state, pager);

  /** The selection cell of a row: a labelled checkbox, or nothing for a row that cannot be chosen. @param {any} item */
  function selectCell(item) {
    if (!spec.selectable?.(item)) return h('td');
    const box = h('input', { type: 'checkbox', class: 'row-select', 'aria-label': `Select ${item.name ?? item.id}` });
    box.checked = selected.has(item.id);
    box.addEventListener('change', () => {
      if (box.checked) selected.add(item.id); else selected.delete(item.id);
      selectChanged();
    });
    return h('td', { class: 'select-cell' }, box);
  }

  async function load() {
    try {
      const [r, extra] = await Promise.all([
        api.get(api.projectPath(project, `${spec.apiPath}?page=${page}`)), spec.extra ? spec.extra(project) : null]);
      if (disposed) return;
      const items = Array.isArray(r.items) ? r.items : [];
      // A selection holds only rows shown: after a reload, what is no longer selectable leaves it.
      const shown = new Set(items.filter((/** @type {any} */ i) => spec.selectable?.(i)).map((/** @type {any} */ i) => i.id));
      for (const id of [...selected]) if (!shown.has(id)) selected.delete(id);
      selectChanged();
      replace(tbody, ...items.map((/** @type {any} */ item) => {
        const link = href(`${spec.path}/${item.id}`, { project });
        return openOnClick(h('tr', { class: 'click-row', 'data-id': item.id },
          ...(spec.selectable ? [selectCell(item)] : []), ...spec.cells(item, link, extra)), link, navigate);
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
