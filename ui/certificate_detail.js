// A certificate: tabs Overview · Distribution (?tab=distribution).
import * as api from './api.js';
import { allPages } from './catalog.js';
import { h, replace, showAlert } from './dom.js';
import { scrollRegion } from './widgets.js';
import * as fmt from './format.js';
import { expiry, renewalWindow } from './certificates.js';
import { href } from './router.js';

/** @param {import('./router.js').PageContext} ctx @returns {import('./router.js').PageHandle} */
export function renderCertificateDetail(ctx) {
  const { project, query } = ctx;
  const id = ctx.params.id;
  const tab = query.get('tab') === 'distribution' ? 'distribution' : 'overview';
  let disposed = false;
  const title = h('h1', { text: 'Certificate' });
  const panel = h('section', { class: 'card', id: 'tab-panel', 'aria-labelledby': `tab-${tab}` });
  const state = h('p', { class: 'muted', role: 'status', text: 'Loading…' });
  /** @param {string} key @param {string} label */
  const tabLink = (key, label) => h('a', {
    class: 'tab', id: `tab-${key}`, href: href(`/certificates/${id}`, { project, tab: key === 'overview' ? null : key }),
    'aria-current': key === tab ? 'page' : null, text: label,
  });
  replace(ctx.root,
    h('p', null, h('a', { class: 'back', href: href('/certificates', { project }), text: '← Back' })),
    h('div', { class: 'page-head' }, title),
    h('nav', { class: 'tabs', 'aria-label': 'Certificate' }, tabLink('overview', 'Overview'), tabLink('distribution', 'Distribution')),
    state, panel);

  /** @param {string} term @param {Node | string} value */
  const row = (term, value) => [h('dt', { text: term }), h('dd', null, value === '' ? '—' : value)];

  async function load() {
    try {
      const c = await api.get(api.projectPath(project, `/certificates/${id}`));
      if (disposed) return;
      title.textContent = c.name ?? 'Certificate';
      state.hidden = true;
      if (tab === 'overview') {
        // A revocation through certfleet names its job; one a check saw (CRL, OCSP) has none.
        const revoked = c.revocation
          ? h('span', { class: 'error-text' }, `${c.revocation.reason ?? 'no reason given'}, `, fmt.timeEl(c.revocation.revoked_at),
            c.revocation.source ? `, seen by ${fmt.revocationSource(c.revocation.source)}` : '',
            c.revocation.job_id ? [' (', h('a', { href: href(`/jobs/${c.revocation.job_id}`, { project }), text: 'job' }), ')'] : [])
          : null;
        replace(panel, h('h2', { text: 'Overview' }), h('dl', { class: 'summary' },
          row('Name', String(c.name ?? '')), row('Status', fmt.outcomeTag(String(c.status ?? ''))),
          row('Source', c.source === 'acme' ? 'ACME' : 'Uploaded'), row('Version', String(c.version ?? '')),
          revoked ? row('Revoked', revoked) : null,
          row('Revocation', fmt.revocationCheck(c.revocation_check)),
          ...(c.source === 'acme' ? [row('Domains', Array.isArray(c.domains) ? c.domains.join(', ') : ''),
            row('Auto-renew', c.auto_renew ? 'Yes' : 'No'),
            row('Renewal Window', renewalWindow(c.renewal, true)),
            row('Last Renewal Job', c.last_job_id ? h('a', { href: href(`/jobs/${c.last_job_id}`, { project }), text: String(c.last_job_id) }) : ''),
            c.last_error ? row('Last Error', h('span', { class: 'tag error-tag', text: String(c.last_error) })) : null] : []),
          row('Subject', String(c.subject ?? '')), row('Issuer', String(c.issuer ?? '')),
          row('SANs', Array.isArray(c.sans) ? c.sans.join(', ') : ''),
          row('Not Before', fmt.timeEl(c.not_before)), row('Not After', c.not_after ? expiry(String(c.not_after)) : ''),
          row('Fingerprint (SHA-256)', h('code', { class: 'break', text: String(c.fingerprint_sha256 ?? '') })),
          row('Created', fmt.timeEl(c.created_at))),
        c.cert_pem ? [h('h3', { text: 'Certificate (PEM)' }), h('pre', { class: 'mono pem', tabindex: '0', 'aria-label': 'Certificate PEM', text: String(c.cert_pem) })] : null);
      } else {
        const ds = (await allPages(api.projectPath(project, '/distributions'), 5000)).filter((d) => d.certificate_id === id);
        if (disposed) return;
        replace(panel, h('h2', { text: 'Distribution' }),
          ds.length ? scrollRegion('Distributions of this certificate', h('table', null,
            h('caption', { class: 'visually-hidden', text: 'Distributions of this certificate' }),
            h('thead', null, h('tr', null, ...['Distribution', 'Status', 'Run', 'Targets', 'Updated'].map((x) => h('th', { scope: 'col', text: x })))),
            h('tbody', null, ...ds.map((d) => h('tr', null,
              h('td', null, h('a', { href: href(`/distributions/${d.id}`, { project }), text: d.name })),
              h('td', null, fmt.outcomeTag(String(d.status))), h('td', { class: 'num', text: String(d.run_no ?? 0) }),
              h('td', { class: 'num', text: String(Array.isArray(d.target_ids) ? d.target_ids.length : 0) }),
              h('td', null, fmt.timeEl(d.updated_at)))))))
            : h('p', { class: 'muted', text: 'No distribution delivers this certificate.' }));
      }
    } catch (e) {
      if (!disposed) showAlert(state, api.errorText(e));
    }
  }
  void load();
  return { refresh() { void load(); }, dispose() { disposed = true; } };
}
