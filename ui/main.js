// Boots the app: the session, the header (navigation, project selector, sign-out), the page for
// the URL, keyboard shortcuts.
import * as api from './api.js';
import { h, replace } from './dom.js';
import * as router from './router.js';
import * as session from './session.js';
import { pages, sectionPath } from './pages.js';
import { renderNotFound } from './not_found.js';

for (const p of pages) router.addRoute(p.name, p.path, p.title, p.render);

const header = h('header', { class: 'app-header' });
const main = h('main', { id: 'main', tabindex: '-1' });
const skip = h('a', { class: 'skip-link', href: '#main', text: 'Skip to content' });

/** @type {router.PageHandle | null} */
let page = null;

/** @param {string | null} [reason] why the sign-in page is shown ("expired": a 401 on a call) */
function loginUrl(reason = null) {
  const next = location.pathname + location.search;
  return router.href('/login', { next: next.startsWith('/login') ? null : next, reason });
}

/** @param {string} active */
function renderHeader(active) {
  const s = session.session();
  if (!s) { replace(header, h('span', { class: 'brand', text: 'certfleet' })); return; }
  const query = new URLSearchParams(location.search);
  const project = session.projectOf(query);
  const activeSection = pages.find((p) => p.name === active)?.section;
  const select = h('select', { id: 'project-select', 'aria-label': 'Project' },
    ...session.projectNames().map((p) => h('option', { value: p, text: p, selected: p === project })));
  if (!session.projectNames().includes(project)) select.append(h('option', { value: project, text: project, selected: true }));
  select.addEventListener('change', () => {
    // The same kind of page in the other project: its list (an object's id means nothing there).
    router.navigate(router.href(sectionPath(activeSection ?? 'jobs'), { project: select.value }));
  });
  const signOut = h('button', { type: 'button', class: 'link-button', text: 'Sign out' });
  signOut.addEventListener('click', async () => {
    try { await session.signOut(); } catch { /* the cookie is gone or the server is; sign in again either way */ }
    router.navigate('/login');
  });
  // At phone width the navigation folds behind Menu (issue 31: the header did not wrap and every
  // page scrolled sideways); wider, the button is not shown and the links always are.
  const menu = h('button', { type: 'button', class: 'menu-toggle', 'aria-expanded': 'false', 'aria-controls': 'main-nav', text: 'Menu' });
  menu.addEventListener('click', () => {
    const open = header.classList.toggle('open');
    menu.setAttribute('aria-expanded', open ? 'true' : 'false');
  });
  header.classList.remove('open');
  replace(header,
    h('a', { class: 'brand', href: router.href('/dashboard', { project }), text: 'certfleet' }),
    menu,
    h('nav', { 'aria-label': 'Main', id: 'main-nav' },
      ...pages.filter((p) => p.nav && (!p.system || session.isSystem()) && (!p.role || session.hasRole(p.role))).map((p) => h('a', {
        href: router.href(p.path, { project }), text: p.nav,
        'aria-current': p.section === activeSection ? 'page' : null,
      }))),
    h('div', { class: 'header-right' },
      h('label', { class: 'project-label', for: 'project-select', text: 'Project' }), select,
      h('span', { class: 'who', text: `${s.token_name ?? 'token'} (${s.system ? `system ${s.role}` : s.role})` }),
      signOut));
}

async function render() {
  page?.dispose?.();
  page = null;
  const m = router.match(location.pathname);
  if (m?.route.name !== 'login' && !session.session()) {
    router.navigate(loginUrl(), { replace: true });
    return;
  }
  if (m?.route.name === 'login' && session.session()) {
    const next = new URLSearchParams(location.search).get('next');
    router.navigate(next && next.startsWith('/') && !next.startsWith('//') ? next : '/dashboard', { replace: true });
    return;
  }
  const query = new URLSearchParams(location.search);
  renderHeader(m?.route.name ?? '');
  main.replaceChildren();
  const ctx = { root: main, params: m?.params ?? {}, query, project: session.projectOf(query), path: location.pathname };
  document.title = `${m?.route.title ?? 'Page not found'} · certfleet`;
  page = (m ? m.route.render(ctx) : renderNotFound(ctx)) ?? null;
}

function onKey(/** @type {KeyboardEvent} */ ev) {
  if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
  const t = ev.target;
  if (t instanceof HTMLInputElement || t instanceof HTMLTextAreaElement || t instanceof HTMLSelectElement
      || (t instanceof HTMLElement && t.isContentEditable)) return;
  if (ev.key === '/') {
    const box = document.getElementById('goto-job');
    if (box) { ev.preventDefault(); box.focus(); }
  } else if (ev.key === 'r') {
    if (page?.refresh) { ev.preventDefault(); page.refresh(); }
  }
}

async function boot() {
  document.body.replaceChildren(skip, header, main);
  api.setUnauthorizedHandler(() => {
    if (!session.session()) return;
    session.forget();
    router.navigate(loginUrl('expired'), { replace: true });
  });
  router.onNavigate(() => { void render(); });
  router.interceptLinks();
  document.addEventListener('keydown', onKey);
  try {
    await session.load();
  } catch (e) {
    replace(main, h('p', { class: 'alert error', role: 'alert', text: `Cannot load the session: ${api.errorText(e)}` }));
    return;
  }
  await render();
}

void boot();
