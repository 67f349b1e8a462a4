// Notifications: the project's channels (where messages go: webhook, email, Slack, Teams) and
// rules (which event goes to which channel, with its template when it has one). An admin can
// send a test message to a channel and read what its server answered.
import * as api from './api.js';
import { h, replace, showAlert } from './dom.js';
import { feedback, scrollRegion } from './widgets.js';
import * as fmt from './format.js';
import * as session from './session.js';

const kindLabels = /** @type {Record<string, string>} */ ({ webhook: 'Webhook', email: 'Email', slack: 'Slack', teams: 'Teams' });

/**
 * Where a channel's messages go, in words (never a secret: the API returns none).
 * @param {any} c a channel view
 * @returns {string}
 */
export function destination(c) {
  if (c.kind === 'email' && c.email) {
    const to = Array.isArray(c.email.to) ? c.email.to.join(', ') : '';
    return `${to} via ${c.email.host}:${c.email.port}${c.email.starttls === false ? ' (no TLS: local relay)' : ''}`;
  }
  if ((c.kind === 'slack' || c.kind === 'teams') && c[c.kind]) return `incoming webhook at ${c[c.kind].webhook_host}`;
  if (c.kind === 'webhook' || !c.kind) {
    try {
      const u = new URL(String(c.url));
      return `${u.protocol}//${u.host}${u.pathname}${c.secret_credential_id ? ' (signed)' : ' (unsigned)'}`;
    } catch {
      return String(c.url ?? '');
    }
  }
  return '';
}

/**
 * What a test send answered, as one line for the feedback area.
 * @param {any} r the test route's answer
 * @returns {{ok: boolean, text: string}}
 */
export function testOutcome(r) {
  const reply = r.reply ? ` Server: ${r.reply}.` : '';
  if (r.delivered) return { ok: true, text: `Test message delivered in ${r.duration_ms} ms.${reply}` };
  const cls = r.error_class ? `[${r.error_class}] ` : '';
  const retry = r.retryable ? ' A notification would be retried.' : ' A notification would not be retried: fix the channel.';
  const after = r.retry_after_s ? ` The server asked to wait ${r.retry_after_s} s.` : '';
  return { ok: false, text: `Test message not delivered: ${cls}${r.error ?? 'unknown error'}.${reply}${after}${retry}` };
}

/** @param {import('./router.js').PageContext} ctx @returns {import('./router.js').PageHandle} */
export function renderNotifications(ctx) {
  const { project } = ctx;
  const fb = feedback();
  let disposed = false;
  const channelsBody = h('tbody');
  const rulesBody = h('tbody');
  const channelsState = h('p', { class: 'muted', role: 'status', text: 'Loading…' });
  const rulesState = h('p', { class: 'muted', role: 'status', text: 'Loading…' });
  const admin = session.canManageJobs();
  const channelColumns = ['Name', 'Kind', 'Destination', 'Secret', 'Created', ...(admin ? ['Actions'] : [])];
  replace(ctx.root,
    h('div', { class: 'page-head' }, h('h1', { text: 'Notifications' })),
    fb.el,
    h('section', { class: 'card', 'aria-labelledby': 'channels-title' },
      h('div', { class: 'card-head' }, h('h2', { id: 'channels-title', text: 'Channels' })),
      scrollRegion('Channels table', h('table', { id: 'channels' },
        h('caption', { class: 'visually-hidden', text: 'Notification channels' }),
        h('thead', null, h('tr', null, ...channelColumns.map((c) => h('th', { scope: 'col', text: c })))),
        channelsBody)),
      channelsState),
    h('section', { class: 'card', 'aria-labelledby': 'rules-title' },
      h('div', { class: 'card-head' }, h('h2', { id: 'rules-title', text: 'Rules' })),
      scrollRegion('Rules table', h('table', { id: 'rules' },
        h('caption', { class: 'visually-hidden', text: 'Notification rules' }),
        h('thead', null, h('tr', null, ...['Event', 'Channel', 'Template'].map((c) => h('th', { scope: 'col', text: c })))),
        rulesBody)),
      rulesState));

  /** @param {any} c */
  function testButton(c) {
    const b = h('button', { type: 'button', class: 'action', 'data-action': 'test', text: 'Send test', 'aria-label': `Send test to ${c.name}` });
    b.addEventListener('click', async () => {
      b.disabled = true;
      fb.ok(`Sending a test message to ${c.name}…`);
      try {
        const r = (await api.post(api.projectPath(project, `/notification-channels/${c.id}/test`))).body;
        const out = testOutcome(r);
        if (out.ok) fb.ok(`${c.name}: ${out.text}`);
        else fb.fail(`${c.name}: ${out.text}`);
      } catch (e) {
        fb.fail(`${c.name}: ${api.errorText(e)}`);
      } finally {
        b.disabled = false;
      }
    });
    return b;
  }

  async function load() {
    try {
      const [channels, rules] = await Promise.all([
        api.get(api.projectPath(project, '/notification-channels?page_size=200')),
        api.get(api.projectPath(project, '/notification-rules?page_size=200'))]);
      if (disposed) return;
      const items = Array.isArray(channels.items) ? channels.items : [];
      /** @type {Map<string, string>} */
      const names = new Map(items.map((/** @type {any} */ c) => [String(c.id), String(c.name)]));
      replace(channelsBody, ...items.map((/** @type {any} */ c) => h('tr', { 'data-id': c.id },
        h('td', { text: c.name }),
        h('td', null, h('span', { class: `tag kind-${c.kind ?? 'webhook'}`, text: kindLabels[c.kind ?? 'webhook'] ?? String(c.kind) })),
        h('td', { class: 'cell-text', text: destination(c) }),
        h('td', { text: c.secret_set ? 'stored (sealed)' : c.secret_credential_id ? 'credential' : '-' }),
        h('td', null, fmt.timeEl(c.created_at)),
        admin ? h('td', { class: 'actions' }, testButton(c)) : null)));
      channelsState.textContent = items.length ? '' : 'No channels in this project.';
      const ruleItems = Array.isArray(rules.items) ? rules.items : [];
      replace(rulesBody, ...ruleItems.map((/** @type {any} */ r) => h('tr', { 'data-id': r.id },
        h('td', null, h('code', { text: r.event })),
        h('td', { text: names.get(String(r.channel_id)) ?? String(r.channel_id) }),
        h('td', { class: 'cell-text' }, r.template
          ? [r.template.subject ? `Subject: ${r.template.subject}` : '', r.template.subject && r.template.body ? ' · ' : '',
              r.template.body ? `Body: ${r.template.body}` : ''].join('')
          : h('span', { class: 'muted', text: 'the event\'s default' })))));
      rulesState.textContent = ruleItems.length ? '' : 'No rules in this project.';
    } catch (e) {
      if (!disposed) showAlert(channelsState, api.errorText(e));
    }
  }
  void load();
  return { refresh() { void load(); }, dispose() { disposed = true; } };
}
