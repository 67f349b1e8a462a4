// Retry and Cancel of a job, shared by the list and the detail; the API's answer is shown
// as it is, and a refused action never looks like it worked.
import * as api from './api.js';
import { h, replace } from './dom.js';
import { href } from './router.js';
import * as session from './session.js';

/**
 * The feedback line of a page: one polite live region; errors in red with role=alert.
 * @returns {{el: HTMLElement, ok: (text: string, ...extra: (Node|string)[]) => void,
 *            fail: (text: string, ...extra: (Node|string)[]) => void, clear: () => void}}
 */
export function feedback() {
  const el = h('div', { class: 'feedback', role: 'status', 'aria-live': 'polite' });
  return {
    el,
    ok(text, ...extra) { el.className = 'feedback ok'; el.setAttribute('role', 'status'); replace(el, h('span', { class: 'feedback-text', text }), ...extra); },
    fail(text, ...extra) { el.className = 'feedback error'; el.setAttribute('role', 'alert'); replace(el, h('span', { class: 'feedback-text', text }), ...extra); },
    clear() { el.className = 'feedback'; el.replaceChildren(); },
  };
}

/**
 * The buttons a job shows to this session: Retry on failed/dead, Cancel on pending/active,
 * both only for a role that may use them.
 * @param {any} job
 * @param {string} project
 * @param {ReturnType<typeof feedback>} fb
 * @param {() => void} done called after an action (refetch)
 */
export function jobActionButtons(job, project, fb, done) {
  if (!session.canManageJobs()) return [];
  /** @type {HTMLButtonElement[]} */
  const out = [];
  const base = api.projectPath(project, `/jobs/${job.id}`);
  if (job.status === 'failed' || job.status === 'dead') {
    const b = h('button', { type: 'button', class: 'action', 'data-action': 'retry', text: 'Retry', 'aria-label': `Retry job ${job.id}` });
    b.addEventListener('click', async (ev) => {
      ev.stopPropagation();
      b.disabled = true;
      try {
        await api.post(`${base}/retry`);
        fb.ok(`Job ${job.id} queued for retry`);
      } catch (e) {
        if (e instanceof api.ApiError && e.status === 429) {
          fb.fail(`retry limit: try again in ${e.retryAfter ?? '?'} s`);
        } else if (e instanceof api.ApiError && e.status === 409 && job.distribution_id) {
          fb.fail(e.message, ' ', h('a', { href: href(`/distributions/${job.distribution_id}`, { project }), text: 'Open the distribution' }));
        } else {
          fb.fail(api.errorText(e));
        }
      } finally {
        b.disabled = false;
        done();
      }
    });
    out.push(b);
  }
  if (job.status === 'pending' || job.status === 'active') {
    const b = h('button', { type: 'button', class: 'action', 'data-action': 'cancel', text: 'Cancel', 'aria-label': `Cancel job ${job.id}` });
    b.addEventListener('click', async (ev) => {
      ev.stopPropagation();
      b.disabled = true;
      try {
        const r = await api.post(`${base}/cancel`);
        fb.ok(typeof r.body?.message === 'string' ? r.body.message : (r.status === 202 ? 'Job cancel requested' : 'Job cancelled'));
      } catch (e) {
        fb.fail(api.errorText(e));
      } finally {
        b.disabled = false;
        done();
      }
    });
    out.push(b);
  }
  return out;
}
