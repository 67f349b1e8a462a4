// Retry and Cancel of a job, shared by the list and the detail; the API's answer is shown
// as it is, and a refused action never looks like it worked.
import * as api from './api.js';
import { h } from './dom.js';
import { confirmAction } from './widgets.js';
import { childKind, typeLabel } from './format.js';
import { href } from './router.js';
import * as session from './session.js';

/**
 * Whether a fan-out child's failed targets can be re-driven now: it ended with failures, in the
 * distribution's last run, which has ended and is not a rollback.
 * @param {any} job @param {any} dist
 */
function redrivable(job, dist) {
  const failedEnd = job.status === 'failed' || job.status === 'dead' || job.status === 'cancelled' ||
    (job.status === 'completed' && job.result_status === 'partial');
  return failedEnd && Number(job.payload?.run_no) === Number(dist.run_no) && dist.status !== 'running' &&
    dist.status !== 'idle' && dist.mode !== 'rollback';
}

/**
 * The buttons a job shows to this session: Retry on failed/dead, Cancel on pending/active,
 * both only for a role that may use them (admin); on an ended fan-out child, the re-drive of its
 * failed targets (operator) or a link to its distribution.
 * @param {any} job
 * @param {string} project
 * @param {ReturnType<typeof import('./widgets.js').feedback>} fb
 * @param {() => void} done called after an action (refetch)
 * @param {any} [dist] a fan-out child's distribution ({run_no, status, mode}), when the caller
 *   read it: then an ended child of its last run offers the in-run re-drive of its failed targets
 */
export function jobActionButtons(job, project, fb, done, dist) {
  /** @type {HTMLElement[]} */
  const out = [];
  const base = api.projectPath(project, `/jobs/${job.id}`);
  const ended = job.status === 'failed' || job.status === 'dead';
  // The re-drive is a distribution action (operator); a job's Retry and Cancel need admin.
  const redrive = Boolean(childKind(job) && job.distribution_id && dist && session.canOperate() && redrivable(job, dist));
  if (redrive) {
    // Issue 31: the child's failed targets run again in its own run, counted with it.
    const b = h('button', { type: 'button', class: 'action', 'data-action': 'retry-targets', text: 'Retry failed targets',
      'aria-label': `Retry the failed targets of job ${job.id} in run ${dist.run_no}` });
    b.addEventListener('click', async (ev) => {
      ev.stopPropagation();
      b.disabled = true;
      try {
        const r = await api.post(api.projectPath(project, `/distributions/${job.distribution_id}/retry-targets`), { job_id: job.id });
        const rb = r.body ?? {};
        const n = Array.isArray(rb.target_ids) ? rb.target_ids.length : 0;
        fb.ok(`${n} failed target${n === 1 ? '' : 's'} of job ${job.id} run again in run ${rb.run_no ?? '?'} as `,
          h('a', { href: href(`/jobs/${rb.job_id}`, { project }), text: `job ${rb.job_id}` }));
      } catch (e) {
        fb.fail(api.errorText(e), ' ', h('a', { href: href(`/distributions/${job.distribution_id}`, { project }), text: 'Open the distribution' }));
      } finally {
        b.disabled = false;
        done();
      }
    });
    out.push(b);
  }
  if (!session.canManageJobs()) return out;
  if (ended && childKind(job) && job.distribution_id) {
    // A fan-out child is never retried as a job (the API answers 409): its failed targets are
    // re-driven on its distribution, so that is where this leads (issue 31) — unless the
    // re-drive above is offered, which the link would only repeat.
    if (!redrive) {
      out.push(h('a', {
        class: 'action', 'data-action': 'retry-distribution', href: href(`/distributions/${job.distribution_id}`, { project }),
        text: 'Retry failed targets', 'aria-label': `Retry failed targets of job ${job.id} on its distribution`,
      }));
    }
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
