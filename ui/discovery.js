// What the two Discovery pages share (discovery_sources.js, discovered_certificates.js): their
// tabs, the schedule in words and a finding's tag (the findings themselves come from the API).
import { h } from './dom.js';
import { href } from './router.js';

/** @param {string} name */
export const findingLabel = (name) => name.replaceAll('_', ' ');

/**
 * "by hand" or "every N hours" / "every day" / "every N days".
 * @param {number | null | undefined} s schedule_s
 */
export function scheduleText(s) {
  const n = Number(s ?? 0);
  if (!(n > 0)) return 'by hand';
  if (n % 86400 === 0) return n === 86400 ? 'every day' : `every ${n / 86400} days`;
  if (n % 3600 === 0) return n === 3600 ? 'every hour' : `every ${n / 3600} hours`;
  return `every ${n} s`;
}

/** @param {number} n @param {string} one @param {string} [many] */
export const count = (n, one, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

/**
 * The tabs of the two Discovery pages.
 * @param {'sources' | 'certificates'} active @param {string} project
 */
export function discoveryTabs(active, project) {
  /** @param {'sources' | 'certificates'} key @param {string} path @param {string} label */
  const tab = (key, path, label) => h('a', { class: 'tab', 'data-tab': key, href: href(path, { project }), text: label, 'aria-current': key === active ? 'page' : null });
  return h('nav', { class: 'tabs', 'aria-label': 'Discovery' },
    tab('sources', '/discovery', 'Sources'), tab('certificates', '/discovery/certificates', 'Discovered certificates'));
}

/**
 * A comma/space/line separated list, empty entries dropped.
 * @param {string} text
 */
export function splitList(text) {
  return text.split(/[\s,]+/).map((s) => s.trim()).filter((s) => s !== '');
}

/**
 * A finding's tag: critical red, warning orange; its text in the title.
 * @param {{name: string, severity: string, text: string}} f
 */
export function findingTag(f) {
  const sev = String(f.severity ?? '').replace(/[^a-z]/g, '') || 'warning';
  return h('span', { class: `tag finding finding-${sev}`, 'data-finding': String(f.name), 'data-severity': sev, title: String(f.text ?? ''), text: findingLabel(String(f.name)) });
}
