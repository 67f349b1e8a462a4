// The Certificates list: name, subject, issuer, SANs, not_after with days left, the renewal
// window and the last issue/renew job of an ACME certificate, fingerprint; for an admin, Issue
// certificate… (a new ACME certificate, issue 31); and, for an operator,
// bulk renewal (issue 31): the selected ACME certificates, or every one expiring within N days,
// in one call (POST …/certificates/renew).
import * as api from './api.js';
import { renderCatalogList } from './catalog_list.js';
import { h } from './dom.js';
import { href } from './router.js';
import * as fmt from './format.js';
import * as session from './session.js';
import { confirmAction, feedback } from './widgets.js';

/** @param {string} notAfter */
export function expiry(notAfter) {
  const days = fmt.daysLeft(notAfter);
  const cls = days === null ? '' : days < 0 ? 'expired' : days < 30 ? 'soon' : 'ok';
  return h('span', { class: `expiry ${cls}` }, notAfter.slice(0, 10), ' ',
    h('span', { class: 'days-left', text: days === null ? '' : days < 0 ? `(expired ${-days} d ago)` : `(${days} d left)` }));
}

/**
 * An ACME certificate's renewal window (DESIGN §9): "from … to …" and where it comes from; "" for
 * an uploaded certificate or one not issued yet.
 * @param {{window_start: string, window_end: string, source: string, checked_at: string | null} | null | undefined} r
 * @param {boolean} long whether to say where the window comes from in words
 */
export function renewalWindow(r, long) {
  if (!r) return '';
  const source = r.source === 'ari' ? "the CA's window (ARI)" : 'the last third of the lifetime';
  return h('span', { class: 'renewal-window', title: `Renewal window: ${source}` },
    fmt.timeEl(r.window_start), ' → ', fmt.timeEl(r.window_end),
    long ? ` (${source}${r.checked_at ? ', read ' : ''}` : '', long && r.checked_at ? fmt.timeEl(r.checked_at) : '',
    long ? ')' : '');
}

/**
 * Small tags beside a certificate's name: "revoked" (red) for a revoked certificate (through
 * certfleet or seen on a CRL/OCSP), "revocation unchecked" (orange) when the last check got no
 * trustworthy answer.
 * @param {any} c
 */
export function revocationTags(c) {
  const out = [];
  if (c.status === 'revoked' || c.revocation_check?.status === 'revoked')
    out.push(h('span', { class: 'tag rev-tag-revoked', 'data-tag': 'revoked', text: 'revoked', title: c.revocation?.reason ? `revoked: ${c.revocation.reason}` : 'revoked' }));
  else if (c.revocation_check?.status === 'error')
    out.push(h('span', { class: 'tag rev-tag-error', 'data-tag': 'revocation-unchecked', text: 'revocation unchecked', title: String(c.revocation_check.detail ?? '') }));
  return out.map((t) => [' ', t]).flat();
}

/**
 * Token ids to names, when this session may list the project's tokens (admins); empty otherwise.
 * @param {string} project @returns {Promise<Map<string, string>>}
 */
export async function tokenNamesOf(project) {
  if (!session.hasRole('admin')) return new Map();
  const list = await api.get(api.projectPath(project, '/tokens')).catch(() => null);
  return new Map(Array.isArray(list?.items) ? list.items.map((/** @type {any} */ t) => [String(t.id), String(t.name)]) : []);
}

/**
 * An approval's person ("token:<id>" or "cli") in words: the token's name when known.
 * @param {string} actor @param {Map<string, string>} names
 */
export function actorInWords(actor, names) {
  if (!actor.startsWith('token:')) return actor === 'cli' ? 'command line' : actor;
  const id = actor.slice(6);
  return names.get(id) ?? `token ${id.slice(0, 8)}`;
}

/**
 * Who asked for an issuance and who decided, when (issuance approval; the certificate and job pages).
 * @param {any} a the certificate's approval @param {(actor: string) => string} name
 */
export function approvalText(a, name) {
  const asked = [`requested by ${name(String(a.requested_by))}, `, fmt.timeEl(a.requested_at)];
  if (a.decision === 'approved')
    return h('span', { 'data-field': 'approval' }, `Approved by ${name(String(a.decided_by))}, `, fmt.timeEl(a.decided_at), ' (', ...asked, ')');
  if (a.decision === 'rejected')
    return h('span', { 'data-field': 'approval' }, h('span', { class: 'error-text', text: `Rejected by ${name(String(a.decided_by))}: ${a.reason ?? ''}` }), ', ', fmt.timeEl(a.decided_at), ' (', ...asked, ')');
  return h('span', { 'data-field': 'approval' }, h('span', { class: 'tag pending-tag', text: 'awaiting approval' }), ' ', ...asked);
}

/**
 * An ACME certificate that has no version yet says so beside its name (issue 31: the list showed
 * nothing for it): "awaiting approval" while an admin has not decided its issue request,
 * "rejected" (red) when one refused it, "pending" while its issue job runs or waits to retry,
 * "issuance failed" (red) once it gave up.
 * @param {any} c
 */
export function issuanceTags(c) {
  if (c.status === 'awaiting_approval')
    return [' ', h('span', { class: 'tag pending-tag', 'data-tag': 'awaiting_approval', text: 'awaiting approval', title: 'its issue request waits for an admin other than the requester to approve or reject it' })];
  if (c.status === 'rejected')
    return [' ', h('span', { class: 'tag rev-tag-revoked', 'data-tag': 'rejected', text: 'rejected', title: `rejected: ${c.approval?.reason ?? ''}` })];
  if (c.status === 'pending')
    return [' ', h('span', { class: 'tag pending-tag', 'data-tag': 'pending', text: 'pending', title: 'not issued yet: its issue job has not stored a certificate' })];
  if (c.status === 'failed')
    return [' ', h('span', { class: 'tag rev-tag-revoked', 'data-tag': 'failed', text: 'issuance failed', title: String(c.last_error ?? '') })];
  return [];
}

/**
 * The last issue/renew job of an ACME certificate and, when its last attempt failed, the error
 * (cut here, whole on hover and on the certificate's page).
 * @param {any} c @param {string} project
 */
export function lastJobCell(c, project) {
  return [
    c.last_job_id ? h('a', { href: href(`/jobs/${c.last_job_id}`, { project }), text: 'Job' }) : null,
    c.last_error ? h('span', { class: 'last-error error-text', title: String(c.last_error), text: String(c.last_error) }) : null,
  ];
}

/** @param {string} fp */
export function shortFingerprint(fp) { return fp.length > 16 ? `${fp.slice(0, 16)}…` : fp; }

/** An ACME certificate with an issued version: what a renewal can renew. @param {any} c */
const renewable = (c) => c.source === 'acme' && Number(c.version) > 0;

/**
 * "Renew selected" and "Renew expiring…", with the answer in words and a link to the jobs.
 * @param {string} project @param {import('./catalog_list.js').CatalogListTools} list
 */
function bulkRenewTools(project, list) {
  const fb = feedback();
  const selectedButton = h('button', { type: 'button', id: 'renew-selected', text: 'Renew selected' });
  const expiringButton = h('button', { type: 'button', id: 'renew-expiring', text: 'Renew expiring…' });
  const showCount = () => {
    const n = list.selected().length;
    selectedButton.disabled = n === 0;
    selectedButton.textContent = n ? `Renew selected (${n})` : 'Renew selected';
  };
  list.onSelect(showCount);
  showCount();

  /** @param {object} body @param {HTMLButtonElement} b @param {string} none what an answer without a renewal says */
  async function send(body, b, none) {
    b.disabled = true;
    try {
      const r = await api.post(api.projectPath(project, '/certificates/renew'), body);
      const requested = Number(r.body?.requested ?? 0);
      const created = Number(r.body?.created ?? 0);
      const skipped = Array.isArray(r.body?.skipped) ? r.body.skipped.length : 0;
      const words = [
        requested === 0 ? none : `${created} renewal${created === 1 ? '' : 's'} started`,
        requested > created ? `${requested - created} already queued` : '',
        skipped ? `${skipped} skipped (uploaded or not issued yet: renew those by uploading a new version)` : '',
      ].filter(Boolean).join(', ');
      fb.ok(`${words}. `, requested ? h('a', { href: href('/jobs', { project, type: 'renew_certificate' }), text: 'Show the renewal jobs' }) : '');
      list.reload();
    } catch (e) {
      fb.fail(api.errorText(e));
    } finally {
      b.disabled = false;
      showCount();
    }
  }

  selectedButton.addEventListener('click', async () => {
    const ids = list.selected();
    if (!ids.length) return;
    if (!await confirmAction({
      title: `Renew ${ids.length} certificate${ids.length === 1 ? '' : 's'}?`,
      text: 'Each selected certificate gets a new order at its CA now, and a distribution with auto-execute delivers the new version. A certificate whose renewal is already queued keeps that one.',
      confirm: 'Renew', keep: 'Not now', undoable: true,
    })) return;
    await send({ certificate_ids: ids }, selectedButton, 'No ACME certificate to renew');
  });
  expiringButton.addEventListener('click', async () => {
    const days = h('input', { id: 'renew-days', type: 'number', min: '1', max: '365', step: '1', value: '30', required: true, class: 'days-input' });
    const fields = h('p', { class: 'dialog-field' }, h('label', { for: 'renew-days', text: 'Expiring within (days, 1 to 365)' }), ' ', days);
    if (!await confirmAction({
      title: 'Renew every certificate expiring soon?',
      text: 'Every ACME certificate of this project whose expiry falls within the days below (expired ones too) gets a new order at its CA now. Uploaded certificates are listed, not renewed.',
      confirm: 'Renew', keep: 'Not now', undoable: true, fields,
    })) return;
    await send({ expiring_within_days: Number(days.value) }, expiringButton, `No ACME certificate expires within ${days.value} days`);
  });
  return h('div', { class: 'page-tools bulk-renew' }, selectedButton, expiringButton, fb.el);
}

/**
 * "Issue certificate…" (admin): a new ACME certificate from the project's ACME accounts and DNS
 * providers. The answer says whether its issue job started or it awaits approval, linked; a
 * refusal shows the API's message (the field it names).
 * @param {string} project @param {import('./catalog_list.js').CatalogListTools} list
 */
function issueTool(project, list) {
  const fb = feedback();
  const button = h('button', { type: 'button', id: 'issue-certificate', text: 'Issue certificate…' });
  button.addEventListener('click', async () => {
    button.disabled = true;
    try {
      const [accounts, providers] = await Promise.all([api.get(api.projectPath(project, '/acme-accounts')), api.get(api.projectPath(project, '/dns-providers'))]);
      const acc = Array.isArray(accounts?.items) ? accounts.items : [];
      const dns = Array.isArray(providers?.items) ? providers.items : [];
      if (!acc.length || !dns.length) {
        fb.fail('Issuing needs an ACME account and a DNS provider in this project: ',
          h('a', { href: href('/dns-providers', { project }), text: 'DNS Providers' }), ' (accounts: POST …/acme-accounts, docs/acme.md).');
        return;
      }
      const name = h('input', { id: 'issue-name', type: 'text', required: true, maxlength: '200', autocomplete: 'off', spellcheck: 'false' });
      const domains = h('textarea', { id: 'issue-domains', rows: '2', required: true, spellcheck: 'false', 'aria-describedby': 'issue-domains-help' });
      const account = h('select', { id: 'issue-account' }, ...acc.map((/** @type {any} */ a) => h('option', { value: String(a.id), text: String(a.name) })));
      const provider = h('select', { id: 'issue-provider' }, ...dns.map((/** @type {any} */ d) => h('option', { value: String(d.id), text: `${d.name} (${d.kind})` })));
      const renew = h('input', { id: 'issue-auto-renew', type: 'checkbox', checked: true });
      /** @param {string} id @param {string} label @param {HTMLElement} input @param {HTMLElement | null} [help] */
      const field = (id, label, input, help = null) => h('p', { class: 'dialog-field' }, h('label', { for: id, text: label }), ' ', input, help);
      const fields = h('div', { class: 'issue-fields' },
        field('issue-name', 'Name', name),
        field('issue-domains', 'Domains', domains, h('span', { class: 'muted', id: 'issue-domains-help', text: ' One per line or separated by commas; *.example.com for a wildcard.' })),
        field('issue-account', 'ACME account', account), field('issue-provider', 'DNS provider', provider),
        h('p', { class: 'dialog-field' }, renew, h('label', { for: 'issue-auto-renew', text: 'Renew automatically' })));
      if (!await confirmAction({
        title: 'Issue a certificate?',
        text: 'certfleet orders it from the account\'s CA with DNS-01 through the DNS provider, and renews it itself when asked to. In a project that requires approval, another admin approves it first.',
        confirm: 'Issue', keep: 'Not now', undoable: true, fields,
      })) return;
      const list_ = domains.value.split(/[\s,]+/).map((d) => d.trim()).filter(Boolean);
      const r = await api.post(api.projectPath(project, '/certificates/issue'), { name: name.value.trim(), domains: list_,
        acme_account_id: account.value, dns_provider_id: provider.value, auto_renew: renew.checked });
      const cert = h('a', { href: href(`/certificates/${r.body?.certificate_id}`, { project }), text: name.value.trim() });
      if (r.body?.status === 'awaiting_approval') fb.ok('Certificate ', cert, ' awaits approval by another admin of the project.');
      else fb.ok('Certificate ', cert, ' is being issued: ', h('a', { href: href(`/jobs/${r.body?.job_id}`, { project }), text: `job ${r.body?.job_id}` }));
      list.reload();
    } catch (e) {
      fb.fail(api.errorText(e));
    } finally {
      button.disabled = false;
    }
  });
  return h('div', { class: 'page-tools issue-tool' }, button, fb.el);
}

/** @param {import('./router.js').PageContext} ctx @returns {import('./router.js').PageHandle} */
export function renderCertificates(ctx) {
  const operate = session.canOperate();
  const admin = session.hasRole('admin');
  /** @param {any} list */
  const tools = (list) => h('div', { class: 'page-tools' }, admin ? issueTool(ctx.project, list) : null, operate ? bulkRenewTools(ctx.project, list) : null);
  return renderCatalogList(ctx, {
    ...(operate ? { selectable: renewable, tools } : {}),
    title: 'Certificates', path: '/certificates', apiPath: '/certificates',
    columns: ['Name', 'Subject', 'Issuer', 'SANs', 'Not After', 'Renewal', 'Last Renewal Job', 'Fingerprint'],
    empty: 'No certificates in this project.',
    cells: (c, link) => [
      h('td', null, h('a', { href: link, text: c.name }), ...issuanceTags(c), ...revocationTags(c)),
      h('td', { text: c.subject ?? '' }),
      h('td', { text: c.issuer ?? '' }),
      h('td', { text: Array.isArray(c.sans) ? c.sans.join(', ') : '' }),
      h('td', null, c.not_after ? expiry(String(c.not_after)) : h('span', { class: 'muted', text: 'not issued yet' })),
      h('td', null, renewalWindow(c.renewal, false)),
      h('td', null, ...lastJobCell(c, ctx.project)),
      h('td', null, h('code', { title: c.fingerprint_sha256 ?? '', text: shortFingerprint(String(c.fingerprint_sha256 ?? '')) }))],
  });
}
