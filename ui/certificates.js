// The Certificates list: name, subject, SANs, not_after with days left, fingerprint.
import { renderCatalogList } from './catalog_list.js';
import { h } from './dom.js';
import * as fmt from './format.js';

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
  return renderCatalogList(ctx, {
    title: 'Certificates', path: '/certificates', apiPath: '/certificates',
    columns: ['Name', 'Subject', 'SANs', 'Not After', 'Fingerprint'], empty: 'No certificates in this project.',
    cells: (c, link) => [
      h('td', null, h('a', { href: link, text: c.name })),
      h('td', { text: c.subject ?? '' }),
      h('td', { text: Array.isArray(c.sans) ? c.sans.join(', ') : '' }),
      h('td', null, c.not_after ? expiry(String(c.not_after)) : ''),
      h('td', null, h('code', { title: c.fingerprint_sha256 ?? '', text: shortFingerprint(String(c.fingerprint_sha256 ?? '')) }))],
  });
}
