// A certificate: tabs Overview · Distribution (?tab=distribution), and its actions by role
// (issue 31): Approve / Reject an issue request that awaits approval (an admin who is not the
// requester; a rejection with a reason), Renew (operator, an issued ACME certificate), Revoke
// (admin, an issued ACME certificate, with a reason, confirmed), Delete (admin, confirmed), and
// Execute on each distribution that delivers it. A started job is linked in the feedback line.
import * as api from './api.js';
import { allPages } from './catalog.js';
import { h, replace, showAlert } from './dom.js';
import { confirmAction, feedback, scrollRegion } from './widgets.js';
import * as fmt from './format.js';
import * as session from './session.js';
import { actorInWords, approvalText, expiry, renewalWindow, tokenNamesOf } from './certificates.js';
import { href, navigate } from './router.js';

// RFC 5280 reasons a subscriber may give an ACME CA (RFC 8555 §7.6); empty: none given.
const revokeReasons = [['', 'No reason given'], ['keyCompromise', 'Key compromise'], ['superseded', 'Superseded'],
  ['affiliationChanged', 'Affiliation changed'], ['cessationOfOperation', 'Cessation of operation']];

/** @param {import('./router.js').PageContext} ctx @returns {import('./router.js').PageHandle} */
export function renderCertificateDetail(ctx) {
  const { project, query } = ctx;
  const id = ctx.params.id;
  const tab = query.get('tab') === 'distribution' ? 'distribution' : 'overview';
  let disposed = false;
  const title = h('h1', { text: 'Certificate' });
  const panel = h('section', { class: 'card', id: 'tab-panel', 'aria-labelledby': `tab-${tab}` });
  const state = h('p', { class: 'muted', role: 'status', text: 'Loading…' });
  /** @param {string} key @param {string} label */
  const tabLink = (key, label) => h('a', {
    class: 'tab', id: `tab-${key}`, href: href(`/certificates/${id}`, { project, tab: key === 'overview' ? null : key }),
    'aria-current': key === tab ? 'page' : null, text: label,
  });
  const actions = h('div', { class: 'page-tools', id: 'certificate-actions' });
  const fb = feedback();
  replace(ctx.root,
    h('p', null, h('a', { class: 'back', href: href('/certificates', { project }), text: '← Back' })),
    h('div', { class: 'page-head' }, title, actions),
    h('nav', { class: 'tabs', 'aria-label': 'Certificate' }, tabLink('overview', 'Overview'), tabLink('distribution', 'Distribution')),
    fb.el, state, panel);

  /** @param {string} jobId */
  const jobLink = (jobId) => h('a', { href: href(`/jobs/${jobId}`, { project }), text: `job ${jobId}` });

  /**
   * A button whose action posts once at a time; its errors go to the feedback line.
   * @param {string} label @param {() => Promise<void>} act
   */
  function actionButton(label, act) {
    const b = h('button', { type: 'button', class: 'action', text: label });
    b.addEventListener('click', async () => {
      b.disabled = true;
      try {
        await act();
      } catch (e) {
        fb.fail(api.errorText(e));
      } finally {
        b.disabled = false;
      }
    });
    return b;
  }

  async function renew() {
    const r = await api.post(api.projectPath(project, `/certificates/${id}/renew`));
    fb.ok(r.body?.created === false ? 'A renewal of this version is already enqueued: ' : 'Renewal started: ', jobLink(String(r.body?.job_id)));
    void load();
  }

  /** @param {any} c */
  async function revoke(c) {
    const reason = h('select', { id: 'revoke-reason' }, ...revokeReasons.map(([v, t]) => h('option', { value: v, text: t })));
    const fields = h('p', { class: 'dialog-field' }, h('label', { for: 'revoke-reason', text: 'Reason' }), ' ', reason);
    if (!await confirmAction({
      title: `Revoke ${c.name}?`,
      text: `The CA revokes version ${c.version} of certificate ${c.name} (${Array.isArray(c.domains) ? c.domains.join(', ') : ''}): clients that check revocation refuse it from then on, on every server it was delivered to. It cannot be undone; renew first if those servers still need a certificate.`,
      confirm: 'Revoke', keep: 'Keep it', fields,
    })) return;
    const r = await api.post(api.projectPath(project, `/certificates/${id}/revoke`), reason.value ? { reason: reason.value } : {});
    fb.ok('Revocation started: ', jobLink(String(r.body?.job_id)));
    void load();
  }

  /** Token ids to names, for the approval's people (admins may list tokens). @type {Map<string, string>} */
  let tokenNames = new Map();
  /** @param {string} actor */
  const actorName = (actor) => actorInWords(actor, tokenNames);

  /** @param {any} c */
  async function approve(c) {
    if (!await confirmAction({
      title: `Approve ${c.name}?`,
      text: `The CA is asked for a certificate for ${Array.isArray(c.domains) ? c.domains.join(', ') : ''}, requested by ${actorName(String(c.approval?.requested_by ?? ''))}. Its issue job starts now.`,
      confirm: 'Approve', keep: 'Not now', undoable: true,
    })) return;
    const r = await api.post(api.projectPath(project, `/certificates/${id}/approve`));
    fb.ok('Approved: issuance started, ', jobLink(String(r.body?.job_id)));
    void load();
  }

  /** @param {any} c */
  async function reject(c) {
    const reason = h('textarea', { id: 'reject-reason', rows: '3', maxlength: '500', required: true, 'aria-describedby': 'reject-reason-help' });
    const fields = h('p', { class: 'dialog-field' }, h('label', { for: 'reject-reason', text: 'Reason' }), ' ', reason,
      h('span', { class: 'muted', id: 'reject-reason-help', text: ' The requester reads it (1 to 500 characters).' }));
    if (!await confirmAction({
      title: `Reject ${c.name}?`,
      text: `Nothing is issued for ${Array.isArray(c.domains) ? c.domains.join(', ') : ''}. The request of ${actorName(String(c.approval?.requested_by ?? ''))} ends here; it cannot be approved afterwards.`,
      confirm: 'Reject', keep: 'Keep it waiting', fields,
    })) return;
    await api.post(api.projectPath(project, `/certificates/${id}/reject`), { reason: reason.value });
    fb.ok(`Rejected: nothing was issued for ${c.name}.`);
    void load();
  }

  /** @param {any} c */
  async function remove(c) {
    if (!await confirmAction({
      title: `Delete ${c.name}?`,
      text: `Certificate ${c.name}, its key and every earlier version are deleted from certfleet (not revoked, not removed from any server). It cannot be undone. A distribution that delivers it must be deleted first.`,
      confirm: 'Delete', keep: 'Keep it',
    })) return;
    await api.del(api.projectPath(project, `/certificates/${id}`));
    navigate(href('/certificates', { project }));
  }

  /** @param {any} c */
  function drawActions(c) {
    const acme = c.source === 'acme';
    const revoked = Boolean(c.revocation) || c.status === 'revoked';
    /** @type {HTMLButtonElement[]} */
    const buttons = [];
    const issued = Number(c.version) > 0;
    /** @type {Node | null} */
    let note = null;
    if (c.status === 'awaiting_approval' && session.hasRole('admin')) {
      // The requester may not decide their own request: say who can instead of a button that fails.
      const mine = c.approval?.requested_by === `token:${session.session()?.token_id ?? ''}`;
      if (mine) note = h('p', { class: 'muted', id: 'approval-note', text: 'You asked for this certificate: another admin of the project approves or rejects it.' });
      else buttons.push(actionButton('Approve', () => approve(c)), actionButton('Reject', () => reject(c)));
    }
    if (acme && !revoked && issued && session.canOperate()) buttons.push(actionButton('Renew', renew));
    if (acme && !revoked && Number(c.version) > 0 && session.hasRole('admin')) buttons.push(actionButton('Revoke', () => revoke(c)));
    if (session.hasRole('admin')) buttons.push(actionButton('Delete', () => remove(c)));
    replace(actions, note, ...buttons);
  }

  /** @param {any} d a distribution */
  function executeButton(d) {
    return actionButton('Execute', async () => {
      const r = await api.post(api.projectPath(project, `/distributions/${d.id}/execute`));
      fb.ok(`Execute: run ${r.body?.run_no ?? '?'} of `, h('a', { href: href(`/distributions/${d.id}`, { project }), text: String(d.name) }), ' started');
      void load();
    });
  }

  /** @param {string} term @param {Node | string} value */
  const row = (term, value) => [h('dt', { text: term }), h('dd', null, value === '' ? '—' : value)];

  async function load() {
    try {
      const c = await api.get(api.projectPath(project, `/certificates/${id}`));
      if (c.approval) tokenNames = await tokenNamesOf(project);
      if (disposed) return;
      title.textContent = c.name ?? 'Certificate';
      state.hidden = true;
      drawActions(c);
      if (tab === 'overview') {
        // A revocation through certfleet names its job; one a check saw (CRL, OCSP) has none.
        const revoked = c.revocation
          ? h('span', { class: 'error-text' }, `${c.revocation.reason ?? 'no reason given'}, `, fmt.timeEl(c.revocation.revoked_at),
            c.revocation.source ? `, seen by ${fmt.revocationSource(c.revocation.source)}` : '',
            c.revocation.job_id ? [' (', h('a', { href: href(`/jobs/${c.revocation.job_id}`, { project }), text: 'job' }), ')'] : [])
          : null;
        replace(panel, h('h2', { text: 'Overview' }), h('dl', { class: 'summary' },
          row('Name', String(c.name ?? '')), row('Status', fmt.outcomeTag(String(c.status ?? ''))),
          c.approval ? row('Approval', approvalText(c.approval, actorName)) : null,
          row('Source', c.source === 'acme' ? 'ACME' : 'Uploaded'), row('Version', String(c.version ?? '')),
          revoked ? row('Revoked', revoked) : null,
          row('Revocation', fmt.revocationCheck(c.revocation_check)),
          ...(c.source === 'acme' ? [row('Domains', Array.isArray(c.domains) ? c.domains.join(', ') : ''),
            row('Auto-renew', c.auto_renew ? 'Yes' : 'No'),
            row('Renewal Window', renewalWindow(c.renewal, true)),
            row('Last Renewal Job', c.last_job_id ? h('a', { href: href(`/jobs/${c.last_job_id}`, { project }), text: String(c.last_job_id) }) : ''),
            c.last_error ? row('Last Error', h('span', { class: 'tag error-tag', text: String(c.last_error) })) : null] : []),
          row('Subject', String(c.subject ?? '')), row('Issuer', String(c.issuer ?? '')),
          row('SANs', Array.isArray(c.sans) ? c.sans.join(', ') : ''),
          row('Not Before', fmt.timeEl(c.not_before)), row('Not After', c.not_after ? expiry(String(c.not_after)) : ''),
          row('Fingerprint (SHA-256)', h('code', { class: 'break', text: String(c.fingerprint_sha256 ?? '') })),
          row('Created', fmt.timeEl(c.created_at))),
        c.cert_pem ? [h('h3', { text: 'Certificate (PEM)' }), h('pre', { class: 'mono pem', tabindex: '0', 'aria-label': 'Certificate PEM', text: String(c.cert_pem) })] : null);
      } else {
        const ds = (await allPages(api.projectPath(project, '/distributions'), 5000)).filter((d) => d.certificate_id === id);
        if (disposed) return;
        replace(panel, h('h2', { text: 'Distribution' }),
          ds.length ? scrollRegion('Distributions of this certificate', h('table', { id: 'certificate-distributions', class: 'phone-cards' },
            h('caption', { class: 'visually-hidden', text: 'Distributions of this certificate' }),
            h('thead', null, h('tr', null, ...['Distribution', 'Status', 'Run', 'Targets', 'Updated', 'Actions'].map((x) => h('th', { scope: 'col', text: x })))),
            h('tbody', null, ...ds.map((d) => h('tr', { 'data-distribution-id': d.id },
              h('td', { 'data-label': 'Distribution' }, h('a', { href: href(`/distributions/${d.id}`, { project }), text: d.name })),
              h('td', { 'data-label': 'Status' }, fmt.outcomeTag(String(d.status))), h('td', { class: 'num', 'data-label': 'Run', text: String(d.run_no ?? 0) }),
              h('td', { class: 'num', 'data-label': 'Targets', text: String(Array.isArray(d.target_ids) ? d.target_ids.length : 0) }),
              h('td', { 'data-label': 'Updated' }, fmt.timeEl(d.updated_at)),
              // Only what can succeed: a running distribution is executed again once its run ends.
              h('td', { class: 'actions', 'data-label': 'Actions' }, session.canOperate() && d.status !== 'running' ? executeButton(d) : null))))))
            : h('p', { class: 'muted', text: 'No distribution delivers this certificate.' }));
      }
    } catch (e) {
      if (!disposed) showAlert(state, api.errorText(e));
    }
  }
  void load();
  return { refresh() { void load(); }, dispose() { disposed = true; } };
}
