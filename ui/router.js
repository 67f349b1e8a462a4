// URL -> page. All state lives in the URL (path and query), so every view can be linked.

/**
 * @typedef {{root: HTMLElement, params: Record<string, string>, query: URLSearchParams,
 *            project: string, path: string}} PageContext
 * @typedef {{dispose?: () => void, refresh?: () => void}} PageHandle
 * @typedef {(ctx: PageContext) => PageHandle | void} PageRender
 * @typedef {{name: string, pattern: RegExp, keys: string[], render: PageRender, title: string}} Route
 */

/** @type {Route[]} */
const routes = [];

/**
 * @param {string} name
 * @param {string} path like /jobs/:id
 * @param {string} title
 * @param {PageRender} render
 */
export function addRoute(name, path, title, render) {
  /** @type {string[]} */
  const keys = [];
  const re = path.replace(/:[a-z]+/g, (m) => { keys.push(m.slice(1)); return '([^/]+)'; });
  routes.push({ name, pattern: new RegExp(`^${re}/?$`), keys, render, title });
}

/**
 * @param {string} pathname
 * @returns {{route: Route, params: Record<string, string>} | null}
 */
export function match(pathname) {
  for (const route of routes) {
    const m = route.pattern.exec(pathname);
    if (!m) continue;
    /** @type {Record<string, string>} */
    const params = {};
    route.keys.forEach((k, i) => { params[k] = decodeURIComponent(m[i + 1]); });
    return { route, params };
  }
  return null;
}

/** @type {(() => void) | null} */
let onChange = null;

/** @param {() => void} fn called after every navigation */
export function onNavigate(fn) { onChange = fn; }

/**
 * Goes to a URL inside the app (no reload).
 * @param {string} url
 * @param {{replace?: boolean}} [opts]
 */
export function navigate(url, opts = {}) {
  if (opts.replace) history.replaceState(null, '', url);
  else history.pushState(null, '', url);
  onChange?.();
}

/**
 * Changes query parameters of the current URL (null removes one) and navigates.
 * @param {Record<string, string | null>} changes
 * @param {{replace?: boolean}} [opts]
 */
export function setQuery(changes, opts) {
  const q = new URLSearchParams(location.search);
  for (const [k, v] of Object.entries(changes)) {
    if (v === null || v === '') q.delete(k);
    else q.set(k, v);
  }
  const s = q.toString();
  navigate(location.pathname + (s ? `?${s}` : ''), opts);
}

/**
 * A UI URL with query parameters (empty values left out).
 * @param {string} path
 * @param {Record<string, string | number | null | undefined>} [query]
 */
export function href(path, query = {}) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== null && v !== undefined && v !== '') q.set(k, String(v));
  const s = q.toString();
  return path + (s ? `?${s}` : '');
}

const jobListKey = 'certfleet.jobs.list';

/**
 * The Jobs list as it was last shown (tab, type filter, page), for the job page's "← Back"
 * (issue 31: it went to the first page of All).
 * @param {string} url
 */
export function rememberJobList(url) {
  try { sessionStorage.setItem(jobListKey, url); } catch { /* storage off: Back opens the first page */ }
}

/** Where the job page's Back goes: the list as last shown in this project, else its first page. @param {string} project */
export function jobListHref(project) {
  let saved = null;
  try { saved = sessionStorage.getItem(jobListKey); } catch { saved = null; }
  if (saved && /^\/jobs(\?|$)/.test(saved) && new URLSearchParams(saved.slice(5)).get('project') === project) return saved;
  return href('/jobs', { project });
}

/** Same-origin link clicks navigate inside the app; /api/ links and modified clicks do not. */
export function interceptLinks() {
  document.addEventListener('click', (ev) => {
    if (ev.defaultPrevented || ev.button !== 0 || ev.metaKey || ev.ctrlKey || ev.shiftKey || ev.altKey) return;
    const a = ev.target instanceof Element ? ev.target.closest('a') : null;
    if (!a || a.target || a.hasAttribute('download')) return;
    const url = new URL(a.href, location.href);
    if (url.origin !== location.origin || url.pathname.startsWith('/api/') || url.pathname.startsWith('/assets/')) return;
    ev.preventDefault();
    navigate(url.pathname + url.search);
  });
  window.addEventListener('popstate', () => onChange?.());
}
