// Job detail: Back, the ID, a Live tag (refetch every 2 s while pending/active), the summary
// card, Why is it waiting? / lease, Target Progress, fan-out alerts, the ACME panels
// (acme_workflow.js) or the MSCA Workflow card (msca_workflow.js), the logs card.
import { acmePanels, acmeWorkflow } from './acme_workflow.js';
import { mscaCard, mscaWorkflow, wantsCertificate } from './msca_workflow.js';
import { actorInWords, approvalText, tokenNamesOf } from './certificates.js';
import * as api from './api.js';
import { allPages, certificateNames } from './catalog.js';
import { h, replace, showAlert } from './dom.js';
import * as fmt from './format.js';
import { jobActionButtons } from './job_actions.js';
import { feedback } from './widgets.js';
import { logsCard } from './logs.js';
import { href, jobListHref } from './router.js';

export const retryWaveAlert = 'Failed targets are retried as a separate retry job — the remaining attempts on this job are not used.';

/**
 * A definition-list row.
 * @param {string} term
 * @param {...(Node | string | null)} value
 */
function row(term, ...value) {
  return [h('dt', { text: term }), h('dd', null, ...(value.length && value.some((v) => v !== '' && v !== null) ? value : ['—']))];
}

/**
 * A "Copy" button for `text`. Its accessible name is "Copy " + `what` ("Copy the error"): the
 * visible word stays the start of the name, also while it says "Copied".
 * @param {string} text @param {string} what
 */
function copyButton(text, what) {
  const word = document.createTextNode('Copy');
  const b = h('button', { type: 'button', class: 'link-button copy-button' }, word, h('span', { class: 'visually-hidden', text: ` ${what}` }));
  b.addEventListener('click', async () => {
    try {
      await navigator.clipboard.writeText(text);
      word.data = 'Copied';
    } catch {
      word.data = 'Copy failed';
    }
    setTimeout(() => { word.data = 'Copy'; }, 1500);
  });
  return b;
}

/** @param {import('./router.js').PageContext} ctx @returns {import('./router.js').PageHandle} */
export function renderJobDetail(ctx) {
  const { project } = ctx;
  const id = ctx.params.id;
  const fb = feedback();
  let disposed = false;
  /** @type {ReturnType<typeof setTimeout> | null} */
  let timer = null;
  /** Token ids to names, for an approval's people. @type {Map<string, string>} */
  let names = new Map();
  /** @type {boolean | null} */
  let batchRetried = null;

  const liveTag = h('span', { class: 'tag live-tag', id: 'live-tag', text: 'Live', hidden: true });
  const title = h('h1', null, 'Job ', h('code', { class: 'job-id', text: id }));
  const actions = h('div', { class: 'page-tools' });
  const alerts = h('div', { class: 'alerts' });
  const summary = h('dl', { class: 'summary' });
  const progressBox = h('div', { class: 'target-progress' });
  const waiting = h('section', { class: 'card waiting', hidden: true, 'aria-labelledby': 'waiting-title' });
  // ACME jobs: Workflow Progress, Manual DNS Challenges, Presented Records.
  const acme = acmePanels({ project, jobId: id, copyButton });
  // AD CS jobs: the MSCA Workflow card.
  const msca = mscaCard({ project });
  const logs = logsCard({ project, jobId: id, query: ctx.query });
  const state = h('p', { class: 'muted', role: 'status' }, 'Loading…');

  const back = h('a', { class: 'back', href: jobListHref(project), text: '← Back' });
  replace(ctx.root,
    h('p', null, back),
    h('div', { class: 'page-head' }, title, liveTag, actions),
    fb.el, state, alerts,
    h('div', { class: 'detail-grid' },
      h('section', { class: 'card', 'aria-labelledby': 'summary-title' }, h('h2', { id: 'summary-title', text: 'Summary' }), summary, progressBox),
      waiting),
    acme.el, msca.el, logs.el);

  /** @param {any} job */
  async function checkBatchRetried(job) {
    // A batch child whose targets went to a retry wave: one of its targets has a result with
    // retry_attempt above 0 in the same run.
    if (batchRetried !== null || !job.distribution_id) return;
    batchRetried = false;
    const targets = new Set(Array.isArray(job.payload?.target_id_batch) ? job.payload.target_id_batch : []);
    if (!targets.size) return;
    try {
      const run = Number(job.payload?.run_no) || '';
      const items = await allPages(api.projectPath(project, `/distributions/${job.distribution_id}/results?run=${run}`), 10000);
      batchRetried = items.some((r) => targets.has(r.target_id) && Number(r.retry_attempt) > 0);
    } catch { batchRetried = false; }
    if (batchRetried && !disposed) void load();
  }

  /**
   * @param {any} job @param {Map<string, string>} certs @param {any} dist a child's distribution, or null
   * @param {any} cert an issue job's certificate (its approval), or null
   */
  function draw(job, certs, dist, cert) {
    const live = fmt.isLive(job);
    liveTag.hidden = !live;
    const kind = fmt.childKind(job);
    // A retry job an operator asked for (retry-targets) rather than an automatic wave.
    const byOperator = kind === 'retry' && String(job.idempotency_key ?? '').includes(':redrive:');
    const retryLabel = byOperator ? 'Retry by operator' : 'Automatic retry';
    const status = fmt.shownStatus(job);
    const parent = job.parent_job_id ? h('a', { href: href(`/jobs/${job.parent_job_id}`, { project }), text: job.parent_job_id, 'data-field': 'parent' }) : '';
    const err = typeof job.error === 'string' && job.error ? job.error : '';
    replace(summary,
      row('Type', fmt.typeLabel(job.type), kind === 'batch' ? h('span', { class: 'tag child', text: 'child' }) : null,
        kind === 'retry' ? h('span', { class: 'tag child', text: retryLabel }) : null),
      row('Status', fmt.statusTag(job.status), status === 'partial' ? h('span', { class: 'tag status-partial', text: 'partial' }) : null,
        job.cancel_requested ? h('span', { class: 'tag status-cancelled', text: 'cancel requested' }) : null),
      row('Attempts', `${job.attempts} / ${job.max_attempts}`),
      row('Duration', live ? '' : fmt.duration(job)),
      row('Triggered By', fmt.triggeredBy(job)),
      cert?.approval?.decision === 'approved' ? row('Approval', approvalText(cert.approval, (a) => actorInWords(a, names))) : null,
      row('Certificate', job.certificate_id ? h('a', { href: href(`/certificates/${job.certificate_id}`, { project }), text: certs.get(job.certificate_id) ?? job.certificate_id }) : ''),
      row('Distribution', job.distribution_id ? h('a', { href: href(`/distributions/${job.distribution_id}`, { project }), text: job.distribution_id }) : ''),
      row('Created', fmt.timeEl(job.created_at)),
      row('Started', fmt.timeEl(job.started_at)),
      row('Completed', fmt.timeEl(job.completed_at)),
      row('Parent Job', parent),
      row('Idempotency Key', job.idempotency_key ? h('code', { text: job.idempotency_key }) : ''),
      row('Error', err ? h('div', { class: 'error-full' }, h('pre', { class: 'mono error-text', text: err }), copyButton(err, 'the error'),
        typeof job.error_hint === 'string' && job.error_hint ? h('p', { class: 'hint', 'data-field': 'error_hint', text: job.error_hint }) : null) : ''));
    const failed = job.status === 'failed' || job.status === 'dead' || status === 'partial';
    // An ACME or AD CS job's progress is its workflow step: its workflow card shows it.
    replace(progressBox, job.progress?.total > 0 && !acmeWorkflow(job) && !mscaWorkflow(job)
      ? [h('h3', { text: 'Target Progress' }), fmt.progress(job.progress, 'Target Progress', failed)] : []);

    const alertNodes = [];
    if (kind === 'retry') {
      alertNodes.push(h('div', { class: 'alert info', role: 'note' }, h('strong', { text: retryLabel }),
        ` of wave ${job.payload?.retry_attempt ?? ''} `, parent ? ['for parent job ', h('a', { href: href(`/jobs/${job.parent_job_id}`, { project }), text: 'Parent Job' })] : null));
    }
    if (kind === 'batch' && batchRetried) alertNodes.push(h('div', { class: 'alert info', role: 'note', id: 'retry-wave-alert', text: retryWaveAlert }));
    replace(alerts, ...alertNodes);
    if (kind === 'batch') void checkBatchRetried(job);

    const w = job.waiting;
    if ((job.status === 'pending' || job.status === 'failed') && w) {
      waiting.hidden = false;
      replace(waiting, h('h2', { id: 'waiting-title', text: 'Why is it waiting?' }), h('dl', { class: 'summary' },
        row('Lane', String(w.lane ?? job.lane ?? '')),
        row(job.status === 'failed' ? 'Next attempt' : 'Ready at', fmt.timeEl(w.ready_at)),
        row('Held', w.held ? 'yes (held until released)' : 'no'),
        row('Lane concurrency', `${w.lane_active ?? '?'} active of ${w.lane_concurrency ?? '?'}`),
        row('Cancel requested', w.cancel_requested ? 'yes' : 'no')));
    } else if (job.status === 'active') {
      waiting.hidden = false;
      // Issue 28/34: a dead worker's job, or one whose lease ran out, says so whatever runs.
      const lease = job.lease ?? {};
      const holder = lease.worker;
      let note = null;
      if (holder && holder.alive === false) note = `${holder.reason ?? `worker ${holder.id} stopped heartbeating`}; reclaiming`;
      else if (lease.lease_expired) note = 'Lease expired: waiting for a worker to reclaim it';
      const workerText = holder ? (holder.alive ? `alive (heartbeat ${Math.round(Number(holder.heartbeat_age_ms) / 1000)} s ago)` : 'not alive') : '';
      replace(waiting, h('h2', { id: 'waiting-title', text: 'Lease' }),
        note ? h('p', { class: 'alert info', role: 'status', 'data-field': 'lease_note', text: note }) : null,
        h('dl', { class: 'summary' },
          row('Locked by', job.locked_by ?? ''), row('Locked until', fmt.timeEl(job.locked_until)),
          row('Worker', workerText)));
    } else {
      waiting.hidden = true;
      waiting.replaceChildren();
    }
    acme.draw(job);
    msca.draw(job, cert);
    replace(actions, ...jobActionButtons(job, project, fb, () => { void load(); }, dist));
    logs.setLive(live);
    return live;
  }

  async function load() {
    if (timer) { clearTimeout(timer); timer = null; }
    try {
      const [job, certs] = await Promise.all([api.get(api.projectPath(project, `/jobs/${id}`)), certificateNames(project)]);
      // An issue job an admin approved says who asked and who approved (issuance approval); an AD
      // CS job that left its request pending at the CA says what became of it.
      const cert = (job.type === 'issue_certificate' || wantsCertificate(job)) && job.certificate_id
        ? await api.get(api.projectPath(project, `/certificates/${job.certificate_id}`)).catch(() => null) : null;
      // Once per page: a live job refetches every 2 s, the token names do not change that fast.
      if (cert?.approval && !names.size) names = await tokenNamesOf(project);
      // A fan-out child's actions depend on its run: read the distribution (none when it is gone).
      const dist = fmt.childKind(job) && job.distribution_id && !fmt.isLive(job)
        ? await api.get(api.projectPath(project, `/distributions/${job.distribution_id}`)).catch(() => null) : null;
      if (disposed) return;
      state.hidden = true;
      const live = draw(job, certs, dist, cert);
      if (live) timer = setTimeout(() => { void load(); }, 2000);
    } catch (e) {
      if (!disposed) showAlert(state, e instanceof api.ApiError && e.status === 404 ? `Job ${id} not found` : api.errorText(e));
    }
  }

  void load();
  return {
    refresh() { void load(); logs.refresh(); },
    dispose() { disposed = true; if (timer) clearTimeout(timer); logs.dispose(); },
  };
}
