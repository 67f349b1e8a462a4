// An AD CS job's MSCA Workflow card on the job detail (DESIGN §13): the steps as the ACME card
// draws them (acme_workflow.js: done, current, skipped, failed in red, the state in words), then
// Certificate Template, CA Request ID, Poll Count, Renewal Mode, Subject, Terminal Reason (issued,
// pending approval at the CA, or the error) and Start Time. msca_issue_certificate,
// msca_renew_certificate and msca_poll_pending jobs carry it.
import { stepList, stepStates } from './acme_workflow.js';
import { h, replace } from './dom.js';
import * as fmt from './format.js';
import { href } from './router.js';

/**
 * @typedef {import('./acme_workflow.js').WorkflowSteps & {kind: 'msca', template: string, request_id: string | null,
 *            poll_count: number, renewal_mode: string, subject: string, terminal_reason: string | null,
 *            started_at: string | null}} MscaWorkflow
 */

export const mscaTitle = 'MSCA Workflow';

/** @type {Record<string, string>} */
const renewalModeText = { new_key: 'new key', renew_with_current: 'renew with current key' };
/** @type {Record<string, string>} */
const stepStateText = { done: 'done', current: 'current', failed: 'failed', skipped: 'skipped', todo: 'not reached' };

/**
 * The job's AD CS workflow, or null when it has none.
 * @param {any} job
 * @returns {MscaWorkflow | null}
 */
export function mscaWorkflow(job) {
  const w = job?.workflow;
  if (!w || typeof w !== 'object' || w.kind !== 'msca' || !Array.isArray(w.steps)) return null;
  /** @param {unknown} v */
  const text = (v) => (typeof v === 'string' && v ? v : null);
  return {
    kind: 'msca',
    step: String(w.step ?? ''),
    steps: w.steps.map(String),
    failed_step: text(w.failed_step),
    skipped_steps: Array.isArray(w.skipped_steps) ? w.skipped_steps.map(String) : [],
    template: String(w.template ?? ''),
    request_id: text(w.request_id) ?? (typeof w.request_id === 'number' ? String(w.request_id) : null),
    poll_count: Number(w.poll_count) || 0,
    renewal_mode: String(w.renewal_mode ?? ''),
    subject: String(w.subject ?? ''),
    terminal_reason: text(w.terminal_reason),
    started_at: text(w.started_at),
  };
}

/**
 * A definition-list row ("—" for no value).
 * @param {string} term @param {string} field @param {...(Node | string | null)} value
 */
function row(term, field, ...value) {
  const shown = value.filter((v) => v !== '' && v !== null);
  return [h('dt', { text: term }), h('dd', { 'data-field': field }, ...(shown.length ? shown : ['—']))];
}

/**
 * Terminal Reason: "issued" (green), the wait at the CA (orange, with what became of the request
 * since, from the certificate: a job that stopped at pending approval stays there, its poll jobs
 * carry on), the error of a failed or dead job (red, whole), or "—" while the job runs.
 * @param {MscaWorkflow} w @param {any} job @param {any} cert the job's certificate, or null
 * @param {string} project
 */
function terminal(w, job, cert, project) {
  const reason = w.terminal_reason;
  if (!reason) return fmt.isLive(job) ? h('span', { class: 'muted', text: 'not yet: the job is running' }) : '';
  if (w.failed_step) return h('pre', { class: 'mono error-text terminal-error', text: reason });
  if (reason === 'issued') return h('span', { class: 'tag terminal-issued', text: reason });
  const waiting = w.step === 'pending_approval';
  return h('span', { class: 'terminal-other' }, h('span', { class: `tag ${waiting ? 'terminal-waiting' : 'terminal-info'}`, text: reason }),
    waiting ? h('span', { class: 'terminal-next', 'data-field': 'since' }, ...sinceThen(w, cert, project)) : null);
}

/**
 * What became of a request this job left pending at the CA, in words.
 * @param {MscaWorkflow} w @param {any} cert @param {string} project
 * @returns {(Node | string)[]}
 */
function sinceThen(w, cert, project) {
  const polls = h('a', { href: href('/jobs', { project, type: 'msca_poll_pending' }), text: 'msca poll pending jobs' });
  const request = w.request_id ? `request ${w.request_id}` : 'the request';
  const m = cert?.msca;
  const same = m && w.request_id && String(m.request_id ?? '') === w.request_id;
  const certLink = () => h('a', { href: href(`/certificates/${cert.id}`, { project }), text: String(cert.name ?? cert.id) });
  if (same && m.disposition === 'issued') {
    return ['Since then the CA issued ', request, ': certificate ', certLink(), ` is at version ${Number(cert.version) || 1}.`];
  }
  if (same && m.disposition && m.disposition !== 'pending') {
    const why = String(m.disposition_message || cert.last_error || '');
    return [`Since then the CA answered ${m.disposition} for ${request}${why ? `: ${why}` : '.'} See certificate `, certLink(), ' and the ', polls, '.'];
  }
  if (same) return [`Still pending: a certificate manager must approve ${request} at the CA; certfleet asks again in `, polls, '.'];
  return [`A certificate manager must approve ${request} at the CA; certfleet asks again in `, polls, ' until it is issued or denied.'];
}

/**
 * "Current Step: submitting (failed)" above the list: the step in words, where a phone wraps the
 * list over several lines.
 * @param {MscaWorkflow} w @param {boolean} live
 */
function currentStep(w, live) {
  const s = stepStates(w).find((x) => x.current);
  // A job that ended at a step it did not finish (it left the request pending at the CA).
  const state = s?.state === 'current' && !live ? 'this job ended here' : s ? stepStateText[s.state] : '';
  return h('p', { class: 'current-step' }, 'Current Step: ',
    h('strong', { 'data-field': 'step', class: s?.state === 'failed' ? 'error-text' : null, text: fmt.typeLabel(w.step) || '—' }),
    state ? ` (${state})` : null);
}

/**
 * Whether the job page should read the job's certificate for this card: the job left a request
 * pending at the CA (what became of it is on the certificate).
 * @param {any} job
 */
export function wantsCertificate(job) {
  const w = mscaWorkflow(job);
  return Boolean(w && !w.failed_step && w.step === 'pending_approval' && job.certificate_id && !fmt.isLive(job));
}

/**
 * The card of one job page: `el` (hidden when the job has no AD CS workflow), `draw(job, cert)`
 * redraws it only when the workflow, the job's status or the certificate's request changed (a
 * live job refetches every 2 s).
 * @param {{project: string}} opts
 */
export function mscaCard({ project }) {
  const el = h('section', { class: 'card msca-workflow', id: 'msca-workflow', 'aria-labelledby': 'msca-workflow-title', hidden: true });
  let last = '';

  /** @param {any} job @param {any} [cert] the job's certificate (wantsCertificate), or null */
  function draw(job, cert = null) {
    const w = mscaWorkflow(job);
    el.hidden = !w;
    if (!w) { last = ''; return; }
    const key = JSON.stringify([w, job.status, cert?.msca ?? null, cert?.version ?? null]);
    if (key === last) return;
    last = key;
    replace(el,
      h('div', { class: 'card-head' }, h('h2', { id: 'msca-workflow-title', text: mscaTitle }),
        h('span', { class: 'muted', text: 'Microsoft AD CS enrollment (CEP/CES)' })),
      currentStep(w, fmt.isLive(job)),
      stepList(w, 'msca-workflow-steps'),
      h('dl', { class: 'summary msca-fields' },
        row('Certificate Template', 'template', w.template ? h('code', { text: w.template }) : ''),
        row('CA Request ID', 'request_id', w.request_id ? h('code', { text: w.request_id }) : ''),
        row('Poll Count', 'poll_count', String(w.poll_count)),
        row('Renewal Mode', 'renewal_mode', renewalModeText[w.renewal_mode] ?? fmt.typeLabel(w.renewal_mode)),
        row('Subject', 'subject', w.subject ? h('code', { class: 'break', text: w.subject }) : ''),
        row('Terminal Reason', 'terminal_reason', terminal(w, job, cert, project)),
        row('Start Time', 'started_at', fmt.timeEl(w.started_at))));
  }

  return { el, draw };
}
