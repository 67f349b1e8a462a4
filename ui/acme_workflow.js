// An ACME job's panels on the job detail (DESIGN §8, §9): Workflow Progress (the steps in order,
// the current one highlighted, those before it done, a failed step red), Manual DNS Challenges
// (each TXT record's FQDN and value, copyable, its status, and Validate DNS for operators and
// above) and Presented Records (what the job put into DNS and when it was removed).
import * as api from './api.js';
import { h, replace, showAlert } from './dom.js';
import { scrollRegion } from './widgets.js';
import * as fmt from './format.js';
import { href } from './router.js';
import * as session from './session.js';

/**
 * @typedef {{fqdn: string, value: string, status: string}} ManualChallenge
 * @typedef {{fqdn: string, provider: string, provider_kind?: string, at: string, removed_at?: string | null}} PresentedRecord
 * @typedef {{step: string, steps: string[], failed_step?: string | null, skipped_steps: string[]}} WorkflowSteps
 *   what every workflow kind's step list is drawn from (ACME here, AD CS in msca_workflow.js)
 * @typedef {WorkflowSteps & {kind: string, manual_challenges: ManualChallenge[], presented_records: PresentedRecord[]}} AcmeWorkflow
 * @typedef {(text: string, what: string) => HTMLButtonElement} CopyButton a "Copy" button named "Copy <what>"
 */

export const manualInstruction = 'Create these TXT records at your DNS provider, then validate.';
export const noRecordsText = 'No records presented by this job.';

/**
 * The job's ACME workflow, or null when it has none (only issue_certificate,
 * renew_certificate and validate_manual_dns jobs carry one).
 * @param {any} job
 * @returns {AcmeWorkflow | null}
 */
export function acmeWorkflow(job) {
  const w = job?.workflow;
  if (!w || typeof w !== 'object' || w.kind !== 'acme' || !Array.isArray(w.steps)) return null;
  return {
    kind: 'acme',
    step: String(w.step ?? ''),
    steps: w.steps.map(String),
    failed_step: typeof w.failed_step === 'string' && w.failed_step ? w.failed_step : null,
    skipped_steps: Array.isArray(w.skipped_steps) ? w.skipped_steps.map(String) : [],
    manual_challenges: Array.isArray(w.manual_challenges) ? w.manual_challenges : [],
    presented_records: Array.isArray(w.presented_records) ? w.presented_records : [],
  };
}

/**
 * Each step's state: done (before the current one, or every step once "completed" is reached),
 * current, failed (the job failed or died there), skipped (not part of this provider's path:
 * awaiting validation for an rfc2136 provider, dns presenting for a manual one), or todo (not
 * reached).
 * @param {WorkflowSteps} w
 * @returns {{name: string, state: 'done' | 'current' | 'failed' | 'skipped' | 'todo', current: boolean}[]}
 */
export function stepStates(w) {
  const at = w.steps.indexOf(w.failed_step ?? w.step);
  const finished = !w.failed_step && w.step === w.steps[w.steps.length - 1];
  return w.steps.map((name, i) => {
    const current = name === w.step;
    if (w.failed_step && name === w.failed_step) return { name, state: 'failed', current };
    if (!current && w.skipped_steps.includes(name)) return { name, state: 'skipped', current };
    if (finished || (at >= 0 && i < at)) return { name, state: 'done', current };
    if (current) return { name, state: 'current', current };
    return { name, state: 'todo', current };
  });
}

/** @type {Record<string, string>} */
const stateText = { done: 'done', current: 'current', failed: 'failed', skipped: 'skipped', todo: 'not reached' };
/** @type {Record<string, string>} */
const stateMark = { done: '✓', current: '', failed: '✕', skipped: '–', todo: '' };

/**
 * The step list of a workflow card (shared with the AD CS card): each step's mark, name and
 * state in words, the current one with aria-current="step".
 * @param {WorkflowSteps} w @param {string} [id]
 */
export function stepList(w, id = 'workflow-steps') {
  return h('ol', { class: 'workflow-steps', id }, stepStates(w).map((s, i) => h('li', {
    class: `workflow-step step-${s.state}`,
    'data-step': s.name,
    'data-state': s.state,
    'aria-current': s.current ? 'step' : null,
  },
  h('span', { class: 'step-mark', 'aria-hidden': 'true', text: stateMark[s.state] || String(i + 1) }),
  h('span', { class: 'step-body' },
    h('span', { class: 'step-name', text: fmt.typeLabel(s.name) }),
    h('span', { class: 'step-state', text: stateText[s.state] })))));
}

/**
 * The panels of one job page. `el` holds them (hidden when the job has no ACME workflow);
 * `draw(job)` redraws them only when the workflow changed, so a refetch every 2 s keeps the
 * focus, a "Copied" and the Validate DNS answer in place.
 * @param {{project: string, jobId: string, copyButton: CopyButton}} opts
 */
export function acmePanels({ project, jobId, copyButton }) {
  const progress = h('section', { class: 'card acme-workflow', id: 'workflow-progress', 'aria-labelledby': 'workflow-title' },
    h('h2', { id: 'workflow-title', text: 'Workflow Progress' }));
  const challengesBody = h('div');
  const validateResult = h('div', { id: 'validate-result', hidden: true });
  const validate = h('button', { type: 'button', class: 'primary', id: 'validate-dns', 'data-action': 'validate-dns', text: 'Validate DNS' });
  validate.addEventListener('click', () => { void validateDns(); });
  const challenges = h('section', { class: 'card manual-challenges', id: 'manual-challenges', 'aria-labelledby': 'challenges-title', hidden: true },
    h('div', { class: 'card-head' }, h('h2', { id: 'challenges-title', text: 'Manual DNS Challenges' }),
      h('div', { class: 'card-tools' }, validate)),
    h('p', { class: 'instruction', text: manualInstruction }),
    challengesBody, validateResult);
  const recordsBody = h('div');
  const records = h('section', { class: 'card presented-records', id: 'presented-records', 'aria-labelledby': 'records-title' },
    h('h2', { id: 'records-title', text: 'Presented Records' }), recordsBody);
  const el = h('div', { class: 'acme-panels', id: 'acme-panels', hidden: true }, progress, challenges, records);
  let last = '';

  async function validateDns() {
    validate.disabled = true;
    try {
      const r = await api.post(api.projectPath(project, `/jobs/${encodeURIComponent(jobId)}/validate-dns`));
      const id = String(r.body?.job_id ?? '');
      validateResult.hidden = false;
      validateResult.className = 'alert info validate-ok';
      validateResult.setAttribute('role', 'status');
      // created false: a validation of this order was already waiting or running (that one).
      replace(validateResult, 'Validation job ', id ? h('a', { href: href(`/jobs/${id}`, { project }), 'data-field': 'validation-job', text: id }) : '?',
        r.body?.created === false ? ' is already waiting or running: it checks the records and, when they are in place, carries the workflow on.'
          : ' queued: it checks the records and, when they are in place, carries the workflow on.');
    } catch (e) {
      showAlert(validateResult, api.errorText(e));
    } finally {
      validate.disabled = false;
    }
  }

  /** @param {ManualChallenge[]} list */
  function challengeTable(list) {
    return scrollRegion('Challenges', h('table', { id: 'challenges-table' },
      h('thead', null, h('tr', null, h('th', { scope: 'col', text: 'FQDN' }), h('th', { scope: 'col', text: 'Value' }), h('th', { scope: 'col', text: 'Status' }))),
      h('tbody', null, list.map((c) => {
        const fqdn = String(c.fqdn ?? ''), value = String(c.value ?? ''), status = String(c.status ?? 'pending');
        return h('tr', { 'data-fqdn': fqdn },
          h('td', { class: 'copy-cell' }, h('code', { class: 'break', 'data-field': 'fqdn', text: fqdn }), copyButton(fqdn, `the name ${fqdn}`)),
          h('td', { class: 'copy-cell' }, h('code', { class: 'break', 'data-field': 'value', text: value }), copyButton(value, `the value of ${fqdn}`)),
          h('td', null, fmt.outcomeTag(status)));
      }))));
  }

  /** @param {PresentedRecord[]} list */
  function recordTable(list) {
    if (!list.length) return h('p', { class: 'muted', id: 'no-records', text: noRecordsText });
    return scrollRegion('Presented records', h('table', { id: 'records-table' },
      h('thead', null, h('tr', null, ['FQDN', 'Provider', 'Presented', 'Removed'].map((t) => h('th', { scope: 'col', text: t })))),
      h('tbody', null, list.map((r) => h('tr', { 'data-fqdn': String(r.fqdn ?? '') },
        h('td', null, h('code', { class: 'break', text: String(r.fqdn ?? '') })),
        h('td', { text: r.provider_kind ? `${r.provider ?? ''} (${r.provider_kind})` : String(r.provider ?? '') }),
        h('td', { class: 'nowrap' }, fmt.timeEl(r.at) || '—'),
        h('td', { class: 'nowrap' }, fmt.timeEl(r.removed_at) || '—'))))));
  }

  /** @param {any} job */
  function draw(job) {
    const w = acmeWorkflow(job);
    el.hidden = !w;
    if (!w) { last = ''; return; }
    const key = JSON.stringify(w);
    if (key === last) return;
    last = key;
    replace(progress, h('h2', { id: 'workflow-title', text: 'Workflow Progress' }), stepList(w));
    challenges.hidden = w.manual_challenges.length === 0;
    replace(challengesBody, challengeTable(w.manual_challenges));
    // Operators and above (the route's role); validating again makes sense until the workflow
    // is through.
    validate.hidden = !session.hasRole('operator') || w.step === w.steps[w.steps.length - 1];
    replace(recordsBody, recordTable(w.presented_records));
  }

  return { el, draw };
}
