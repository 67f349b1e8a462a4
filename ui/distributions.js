// The Distributions list.
import { certificateNames } from './catalog.js';
import { renderCatalogList } from './catalog_list.js';
import { h } from './dom.js';
import * as fmt from './format.js';
import { href } from './router.js';

/** @param {import('./router.js').PageContext} ctx @returns {import('./router.js').PageHandle} */
export function renderDistributions(ctx) {
  const { project } = ctx;
  return renderCatalogList(ctx, {
    title: 'Distributions', path: '/distributions', apiPath: '/distributions',
    columns: ['Name', 'Status', 'Run', 'Mode', 'Certificate', 'Targets', 'Updated'], empty: 'No distributions in this project.',
    extra: certificateNames,
    cells: (d, link, certs) => [
      h('td', null, h('a', { href: link, text: d.name })),
      h('td', null, fmt.outcomeTag(String(d.status))),
      h('td', { class: 'num', text: String(d.run_no ?? 0) }),
      h('td', { text: d.mode ?? '' }),
      h('td', null, d.certificate_id ? h('a', { href: href(`/certificates/${d.certificate_id}`, { project }), text: certs.get(d.certificate_id) ?? d.certificate_id.slice(0, 8) }) : ''),
      h('td', { class: 'num', text: String(Array.isArray(d.target_ids) ? d.target_ids.length : '') }),
      h('td', null, fmt.timeEl(d.updated_at))],
  });
}
