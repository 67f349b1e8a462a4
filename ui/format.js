// How values are shown: job types, statuses, times, durations, who triggered a job.
import { h } from './dom.js';

/** @param {string} type */
export function typeLabel(type) { return type.replaceAll('_', ' '); }

/**
 * A batch or retry child of a fan-out distribution run: "batch", "retry" or null.
 * @param {any} job
 * @returns {'batch' | 'retry' | null}
 */
export function childKind(job) {
  const mode = job?.payload?.mode;
  if (job?.parent_job_id && (mode === 'batch' || mode === 'retry')) return mode;
  if (job?.type === 'distribution_execute' && (mode === 'batch' || mode === 'retry')) return mode;
  return null;
}

/**
 * The status a job shows: "partial" for a completed job whose result_status is partial.
 * @param {any} job
 */
export function shownStatus(job) {
  return job.status === 'completed' && job.result_status === 'partial' ? 'partial' : String(job.status);
}

/** @param {string} status */
export function statusTag(status) {
  return h('span', { class: `tag status-${status.replace(/[^a-z_]/g, '')}`, text: status });
}

/**
 * A distribution's or a target result's status (failed is red here: nothing retries it by itself).
 * @param {string} status
 */
export function outcomeTag(status) {
  return h('span', { class: `tag outcome-${status.replace(/[^a-z_]/g, '')}`, text: status });
}

/**
 * "23:13:02.134", local (a log line's time; the date is in its title).
 * @param {string} t
 */
export function clock(t) {
  const d = new Date(t);
  if (Number.isNaN(d.getTime())) return String(t);
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${String(d.getMilliseconds()).padStart(3, '0')}`;
}

/** @param {any} job */
export function isLive(job) { return job.status === 'pending' || job.status === 'active'; }

/** @param {number} n */
function pad(n) { return String(n).padStart(2, '0'); }

/**
 * A local time "2026-12-01 22:49:16" from an ISO string or epoch milliseconds; "" for none.
 * @param {string | number | null | undefined} t
 */
export function time(t) {
  if (t === null || t === undefined || t === '' || t === 0) return '';
  const d = new Date(t);
  if (Number.isNaN(d.getTime())) return String(t);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

/**
 * A <time> element with the machine-readable value.
 * @param {string | number | null | undefined} t
 */
export function timeEl(t) {
  const text = time(t);
  if (!text) return '';
  const d = new Date(/** @type {string | number} */ (t));
  const iso = d.toISOString();
  // The zone it is written in, and the UTC value on hover (issue 31: an operator comparing the
  // page with a log or a colleague's screen must know which clock it is).
  const zone = zoneOf(d);
  // Date and clock apart, so a narrow column may break between them and nowhere else.
  const [day, clock] = [text.slice(0, 10), text.slice(11)];
  return h('time', { datetime: iso, title: `${iso.slice(0, 10)} ${iso.slice(11, 19)} UTC` },
    h('span', { class: 'time-day', text: day }), ' ', h('span', { class: 'time-clock', text: zone ? `${clock} ${zone}` : clock }));
}

/**
 * The browser's time zone at `d`, short ("UTC", "CET", "GMT+2"); "" if the browser names none.
 * @param {Date} d
 */
export function zoneOf(d) {
  return zoneFormat.formatToParts(d).find((p) => p.type === 'timeZoneName')?.value ?? '';
}
// One formatter for every time on a page (a list redraws dozens every 10 s).
const zoneFormat = new Intl.DateTimeFormat(undefined, { timeZoneName: 'short' });

/**
 * Seconds with one decimal, from milliseconds; "" when unknown.
 * @param {number | null | undefined} ms
 */
export function seconds(ms) {
  if (ms === null || ms === undefined) return '';
  return `${(ms / 1000).toFixed(ms < 1000 ? 2 : ms < 10000 ? 1 : 0)} s`;
}

/** @param {any} job */
export function duration(job) {
  if (typeof job.duration_ms === 'number') return seconds(job.duration_ms);
  if (job.started_at && job.completed_at) return seconds(Date.parse(job.completed_at) - Date.parse(job.started_at));
  return '';
}

/**
 * Who triggered a job: the token's name or the system trigger in words.
 * @param {any} job
 */
export function triggeredBy(job) {
  if (typeof job.triggered_by_name === 'string' && job.triggered_by_name) return job.triggered_by_name;
  const t = typeof job.triggered_by === 'string' ? job.triggered_by : '';
  if (!t) return 'system';
  return t;
}

/**
 * A progress bar with its text, or "-" when the job reports no total.
 * @param {{current: number, total: number} | null | undefined} p
 * @param {string} label
 * @param {boolean} [failed]
 */
export function progress(p, label, failed = false) {
  if (!p || !(p.total > 0)) return h('span', { class: 'muted', text: '-' });
  return h('span', { class: 'progress-cell' },
    h('progress', { value: Math.min(p.current, p.total), max: p.total, 'aria-label': label, class: failed ? 'failed' : null }),
    h('span', { class: 'progress-text', text: `${p.current}/${p.total}` }));
}

/**
 * Days from now to an ISO time (negative when past).
 * @param {string} iso
 */
export function daysLeft(iso) {
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return null;
  return Math.floor((t - Date.now()) / 86400000);
}

/**
 * "in 12 days", "3 days ago", "today" from an ISO time; "" when unknown.
 * @param {string | null | undefined} iso
 */
export function relativeDays(iso) {
  if (!iso) return '';
  const d = daysLeft(iso);
  if (d === null) return '';
  if (d === 0) return Date.parse(iso) >= Date.now() ? 'today' : 'today (passed)';
  if (d > 0) return `in ${d} day${d === 1 ? '' : 's'}`;
  return `${-d} day${d === -1 ? '' : 's'} ago`;
}

/** Revocation sources in words. */
const revocationSources = /** @type {Record<string, string>} */ ({ crl: 'CRL', ocsp: 'OCSP', request: 'request' });

/** @param {string | null | undefined} source */
export function revocationSource(source) {
  return source ? (revocationSources[source] ?? String(source)) : '';
}

/**
 * What the last revocation_check learned about a certificate's current version, as one line:
 * good (green), revoked (red), error = not checked (orange), unknown (grey); null: "Not checked yet".
 * A revoked certificate's reason and time are the page's Revoked row, not repeated here.
 * @param {any} rc the view's `revocation_check`
 * @returns {HTMLElement}
 */
export function revocationCheck(rc) {
  if (!rc) return h('span', { class: 'revocation rev-none muted', 'data-revocation': 'none', text: 'Not checked yet' });
  const status = String(rc.status ?? '');
  const src = revocationSource(rc.source);
  if (status === 'good') {
    return h('span', { class: 'revocation rev-good', 'data-revocation': 'good' },
      h('span', { class: 'tag rev-tag-good', text: 'Good' }), ` (${src ? `${src}, ` : ''}checked `, timeEl(rc.checked_at),
      rc.next_update ? [', next update ', timeEl(rc.next_update)] : [], ')');
  }
  if (status === 'revoked') {
    return h('span', { class: 'revocation rev-revoked', 'data-revocation': 'revoked' },
      h('span', { class: 'tag rev-tag-revoked', text: 'Revoked' }), ` (${src ? `${src}, ` : ''}checked `, timeEl(rc.checked_at), ')');
  }
  if (status === 'error') {
    return h('span', { class: 'revocation rev-error', 'data-revocation': 'error' },
      h('span', { class: 'tag rev-tag-error', text: 'Not checked' }), h('span', { class: 'visually-hidden', text: ':' }), ' ', h('span', { class: 'rev-detail', text: String(rc.detail ?? '') }),
      ' (tried ', timeEl(rc.checked_at), ')');
  }
  return h('span', { class: 'revocation rev-unknown', 'data-revocation': 'unknown' },
    h('span', { class: 'tag rev-tag-unknown', text: 'Unknown' }), h('span', { class: 'visually-hidden', text: ':' }), ' ', h('span', { class: 'rev-detail', text: String(rc.detail ?? '') }),
    ' (checked ', timeEl(rc.checked_at), ')');
}
