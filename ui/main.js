// Boots the app: the session, the header (navigation, project selector, sign-out), the page for
// the URL, keyboard shortcuts.
import * as api from './api.js';
import { h, replace } from './dom.js';
import * as router from './router.js';
import * as session from './session.js';
import { renderJobs } from './jobs.js';
import { renderJobDetail } from './job_detail.js';
import { renderDistributions } from './distributions.js';
import { renderDistributionDetail } from './distribution_detail.js';
import { renderCertificates } from './certificates.js';
import { renderCertificateDetail } from './certificate_detail.js';
import { renderSettings } from './settings.js';
import { renderNotifications } from './notifications.js';
import { renderDomains } from './domains.js';
import { renderDiscoverySources, renderDiscoveredCertificates } from './discovery.js';
import { renderLogin } from './login.js';
import { renderNotFound } from './not_found.js';

router.addRoute('jobs', '/jobs', 'Job Queue', renderJobs);
router.addRoute('job', '/jobs/:id', 'Job', renderJobDetail);
router.addRoute('distributions', '/distributions', 'Distributions', renderDistributions);
router.addRoute('distribution', '/distributions/:id', 'Distribution', renderDistributionDetail);
router.addRoute('certificates', '/certificates', 'Certificates', renderCertificates);
router.addRoute('certificate', '/certificates/:id', 'Certificate', renderCertificateDetail);
router.addRoute('notifications', '/notifications', 'Notifications', renderNotifications);
router.addRoute('domains', '/domains', 'Domains', renderDomains);
router.addRoute('discovery', '/discovery', 'Discovery', renderDiscoverySources);
router.addRoute('discovery-certificates', '/discovery/certificates', 'Discovered certificates', renderDiscoveredCertificates);
router.addRoute('settings', '/settings', 'Settings', renderSettings);
router.addRoute('login', '/login', 'Sign in', renderLogin);

const header = h('header', { class: 'app-header' });
const main = h('main', { id: 'main', tabindex: '-1' });
const skip = h('a', { class: 'skip-link', href: '#main', text: 'Skip to content' });

/** @type {router.PageHandle | null} */
let page = null;

function loginUrl() {
  const next = location.pathname + location.search;
  return router.href('/login', { next: next.startsWith('/login') ? null : next });
}

/** @param {string} active */
function renderHeader(active) {
  const s = session.session();
  if (!s) { replace(header, h('span', { class: 'brand', text: 'certfleet' })); return; }
  const query = new URLSearchParams(location.search);
  const project = session.projectOf(query);
  /** @param {string} path @param {string} label @param {string[]} names */
  const link = (path, label, names) => h('a', {
    href: router.href(path, { project }), text: label,
    'aria-current': names.includes(active) ? 'page' : null,
  });
  const select = h('select', { id: 'project-select', 'aria-label': 'Project' },
    ...session.projectNames().map((p) => h('option', { value: p, text: p, selected: p === project })));
  if (!session.projectNames().includes(project)) select.append(h('option', { value: project, text: project, selected: true }));
  select.addEventListener('change', () => {
    const m = router.match(location.pathname);
    const list = m?.route.name.startsWith('distribution') ? '/distributions'
      : m?.route.name.startsWith('certificate') ? '/certificates'
        : m?.route.name === 'notifications' ? '/notifications'
          : m?.route.name === 'domains' ? '/domains'
            : m?.route.name.startsWith('discovery') ? '/discovery' : '/jobs';
    router.navigate(router.href(list, { project: select.value }));
  });
  const signOut = h('button', { type: 'button', class: 'link-button', text: 'Sign out' });
  signOut.addEventListener('click', async () => {
    try { await session.signOut(); } catch { /* the cookie is gone or the server is; sign in again either way */ }
    router.navigate('/login');
  });
  replace(header,
    h('a', { class: 'brand', href: router.href('/jobs', { project }), text: 'certfleet' }),
    h('nav', { 'aria-label': 'Main' },
      link('/jobs', 'Jobs', ['jobs', 'job']),
      link('/distributions', 'Distributions', ['distributions', 'distribution']),
      link('/certificates', 'Certificates', ['certificates', 'certificate']),
      link('/domains', 'Domains', ['domains']),
      link('/discovery', 'Discovery', ['discovery', 'discovery-certificates']),
      link('/notifications', 'Notifications', ['notifications']),
      session.isSystem() ? link('/settings', 'Settings', ['settings']) : null),
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
    router.navigate(next && next.startsWith('/') && !next.startsWith('//') ? next : '/jobs', { replace: true });
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
    router.navigate(loginUrl(), { replace: true });
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
