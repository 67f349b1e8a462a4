// Retry and Cancel of a job, shared by the list and the detail; the API's answer is shown
// as it is, and a refused action never looks like it worked.
import * as api from './api.js';
import { h } from './dom.js';
import { confirmAction } from './widgets.js';
import { childKind, typeLabel } from './format.js';
import { href } from './router.js';
import * as session from './session.js';

/**
 * The buttons a job shows to this session: Retry on failed/dead, Cancel on pending/active,
 * both only for a role that may use them.
 * @param {any} job
 * @param {string} project
 * @param {ReturnType<typeof import('./widgets.js').feedback>} fb
 * @param {() => void} done called after an action (refetch)
 */
export function jobActionButtons(job, project, fb, done) {
  if (!session.canManageJobs()) return [];
  /** @type {HTMLElement[]} */
  const out = [];
  const base = api.projectPath(project, `/jobs/${job.id}`);
  const ended = job.status === 'failed' || job.status === 'dead';
  if (ended && childKind(job) && job.distribution_id) {
    // A fan-out child is never retried on its own (the API answers 409): its targets are
    // re-driven by the distribution's Retry failed, so that is what is offered (issue 31).
    out.push(h('a', {
      class: 'action', 'data-action': 'retry-distribution', href: href(`/distributions/${job.distribution_id}`, { project }),
      text: 'Retry failed targets', 'aria-label': `Retry failed targets of job ${job.id} on its distribution`,
    }));
  } else if (ended) {
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
      // A cancel cannot be undone, and a row may have moved under the pointer: the dialog names
      // the job it acts on (issue 31).
      const yes = await confirmAction({
        title: `Cancel job ${job.id}?`,
        text: `${typeLabel(job.type)} job ${job.id} (${job.status}) will be cancelled${job.status === 'active' ? ' (asked to stop; it ends at its next step)' : ''}. This cannot be undone.`,
        confirm: 'Cancel job', keep: 'Keep job',
      });
      if (!yes) return;
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
