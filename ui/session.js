// The signed-in session: who, which project, which role; what the role may do.
import * as api from './api.js';

/**
 * @typedef {{csrf_token: string, project: string | null, role: string, system: boolean,
 *            token_name: string | null, token_id: string | null, expires_at: string | null}} Session
 */

/** @type {Session | null} */
let current = null;
/** @type {string[]} */
let projects = [];

const roleRank = /** @type {const} */ ({ viewer: 0, operator: 1, admin: 2, owner: 3 });

/** @returns {Session | null} */
export function session() { return current; }

/** @returns {string[]} */
export function projectNames() { return projects; }

/** @param {any} body @returns {Session} */
function fromBody(body) {
  return {
    csrf_token: String(body?.csrf_token ?? ''),
    project: typeof body?.project === 'string' ? body.project : null,
    role: String(body?.role ?? 'viewer'),
    system: body?.system === true,
    token_name: typeof body?.token_name === 'string' ? body.token_name : null,
    token_id: typeof body?.token_id === 'string' ? body.token_id : null,
    expires_at: typeof body?.expires_at === 'string' ? body.expires_at : null,
  };
}

async function loadProjects() {
  try {
    const r = await api.get('/api/v1/projects');
    projects = Array.isArray(r?.items) ? r.items.map((/** @type {any} */ p) => String(p.name)) : [];
  } catch {
    projects = current?.project ? [current.project] : [];
  }
}

/** Reads the session from the cookie; null when there is none (401). */
export async function load() {
  try {
    current = fromBody(await api.get('/api/v1/session', { quiet401: true }));
  } catch (e) {
    if (e instanceof api.ApiError && e.status === 401) {
      current = null;
      api.setCsrfToken(null);
      return null;
    }
    throw e;
  }
  api.setCsrfToken(current.csrf_token);
  await loadProjects();
  return current;
}

/** @param {string} token */
export async function signIn(token) {
  const r = await api.post('/api/v1/session', { token });
  current = fromBody(r.body);
  api.setCsrfToken(current.csrf_token);
  await loadProjects();
  return current;
}

export async function signOut() {
  try {
    await api.del('/api/v1/session');
  } finally {
    current = null;
    projects = [];
    api.setCsrfToken(null);
  }
}

/** Forgets the session locally (it expired on the server). */
export function forget() {
  current = null;
  api.setCsrfToken(null);
}

/**
 * The project a page works in: ?project= or the session's, else "default" or the first one.
 * @param {URLSearchParams} query
 */
export function projectOf(query) {
  const q = query.get('project');
  if (q) return q;
  if (current?.project) return current.project;
  if (projects.includes('default') || projects.length === 0) return 'default';
  return projects[0];
}

/**
 * @param {'viewer' | 'operator' | 'admin' | 'owner'} min
 */
export function hasRole(min) {
  if (!current) return false;
  if (current.system) return true;
  const have = /** @type {Record<string, number>} */ (roleRank)[current.role];
  return have !== undefined && have >= roleRank[min];
}

/** Retry / Cancel of a job. */
export function canManageJobs() { return hasRole('admin'); }
/** Execute / Retry failed / Cancel / Rollback of a distribution. */
export function canOperate() { return hasRole('operator'); }
/** The Settings page. */
export function isSystem() { return current?.system === true; }
