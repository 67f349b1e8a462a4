// Names of catalog objects by id, for links that show a name (certificates in the job list).
import * as api from './api.js';

/** @type {Map<string, {at: number, names: Map<string, string>}>} */
const certCache = new Map();

/**
 * Certificate id -> name for a project (cached for 30 s; the first 200 certificates).
 * @param {string} project
 * @returns {Promise<Map<string, string>>}
 */
export async function certificateNames(project) {
  const hit = certCache.get(project);
  if (hit && Date.now() - hit.at < 30000) return hit.names;
  /** @type {Map<string, string>} */
  const names = new Map();
  try {
    const r = await api.get(api.projectPath(project, '/certificates?page_size=200'));
    for (const c of r?.items ?? []) names.set(String(c.id), String(c.name));
  } catch { /* a viewer without certificates, or none: ids are shown instead */ }
  certCache.set(project, { at: Date.now(), names });
  return names;
}

/**
 * Drops a project's cached certificate names (after this page made a certificate).
 * @param {string} project
 */
export function forgetCertificateNames(project) { certCache.delete(project); }

/**
 * Every page of a paged list route (page_size 200), up to `max` items.
 * @param {string} path with or without a query
 * @param {number} [max]
 * @returns {Promise<any[]>}
 */
export async function allPages(path, max = 20000) {
  /** @type {any[]} */
  const out = [];
  const sep = path.includes('?') ? '&' : '?';
  for (let page = 1; out.length < max; ++page) {
    const r = await api.get(`${path}${sep}page=${page}&page_size=200`);
    const items = Array.isArray(r?.items) ? r.items : [];
    out.push(...items);
    if (items.length < 200 || (typeof r.total === 'number' && out.length >= r.total)) break;
  }
  return out;
}
