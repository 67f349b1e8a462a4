// The fetch wrapper: cookie auth (same origin), X-CSRF-Token on every non-GET, and the API's
// error body {"error":{"code","message","field"}} turned into an ApiError.

export class ApiError extends Error {
  /**
   * @param {number} status
   * @param {string} code
   * @param {string} message
   * @param {string | null} field
   * @param {number | null} retryAfter seconds, from Retry-After (429, 503)
   */
  constructor(status, code, message, field, retryAfter) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
    this.field = field;
    this.retryAfter = retryAfter;
  }
}

/** @type {string | null} */
let csrfToken = null;
/** @type {(() => void) | null} */
let onUnauthorized = null;

/** @param {string | null} token */
export function setCsrfToken(token) { csrfToken = token; }

/** Called once when an API call answers 401 (the session expired or was signed out). */
/** @param {() => void} fn */
export function setUnauthorizedHandler(fn) { onUnauthorized = fn; }

/**
 * The server ended a live stream because its credential ended (WebSocket close 1008: the token
 * revoked or expired, the session signed out): the same as a 401 on a call.
 */
export function credentialEnded() { if (onUnauthorized) onUnauthorized(); }

/** The close code of a live log stream whose token or session ended (stream_watch.hpp). */
export const CLOSE_CREDENTIAL_ENDED = 1008;

/**
 * @typedef {{status: number, body: any, headers: Headers}} ApiResponse
 */

/**
 * @param {string} method
 * @param {string} path starting with /api/
 * @param {unknown} [body]
 * @param {{quiet401?: boolean}} [opts]
 * @returns {Promise<ApiResponse>}
 */
export async function request(method, path, body, opts = {}) {
  /** @type {Record<string, string>} */
  const headers = { Accept: 'application/json' };
  if (method !== 'GET' && csrfToken) headers['X-CSRF-Token'] = csrfToken;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let res;
  try {
    res = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: 'same-origin',
      cache: 'no-store',
    });
  } catch (e) {
    throw new ApiError(0, 'network', `cannot reach the server: ${e instanceof Error ? e.message : String(e)}`, null, null);
  }
  const text = await res.text();
  /** @type {any} */
  let parsed = null;
  if (text) {
    try { parsed = JSON.parse(text); } catch { parsed = null; }
  }
  if (!res.ok) {
    const err = parsed && typeof parsed === 'object' && parsed.error ? parsed.error : null;
    const ra = res.headers.get('Retry-After');
    const e = new ApiError(res.status, err?.code ?? `http_${res.status}`,
      err?.message ?? `${method} ${path} answered ${res.status}`, err?.field ?? null,
      ra !== null && /^\d+$/.test(ra) ? Number(ra) : null);
    if (res.status === 401 && !opts.quiet401 && onUnauthorized) onUnauthorized();
    throw e;
  }
  return { status: res.status, body: parsed, headers: res.headers };
}

/** @param {string} path @param {{quiet401?: boolean}} [opts] */
export async function get(path, opts) { return (await request('GET', path, undefined, opts)).body; }
/** @param {string} path @param {unknown} [body] */
export function post(path, body) { return request('POST', path, body); }
/** @param {string} path @param {unknown} body */
export function put(path, body) { return request('PUT', path, body); }
/** @param {string} path */
export function del(path) { return request('DELETE', path); }

/**
 * `/api/v1/projects/{p}` + rest, the project name escaped.
 * @param {string} project
 * @param {string} rest
 */
export function projectPath(project, rest) {
  return `/api/v1/projects/${encodeURIComponent(project)}${rest}`;
}

/**
 * The message to show for a failed call (never a success look).
 * @param {unknown} e
 */
export function errorText(e) {
  if (e instanceof ApiError) return e.message;
  return e instanceof Error ? e.message : String(e);
}
