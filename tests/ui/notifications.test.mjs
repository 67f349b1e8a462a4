// Notifications page: the project's channels (kind, destination, no secret) and rules (event,
// channel, template); an admin sends a test message and reads what the receiver answered
// (delivered, or refused with its class and the server's answer); a viewer sees no test button.
// The receiver is a real HTTP server on 127.0.0.1 started here.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { startCertfleet, launch, signIn, collectErrors, shot } from './helpers.mjs';

/** @type {Awaited<ReturnType<typeof startCertfleet>>} */
let cf;
/** @type {Awaited<ReturnType<typeof launch>>} */
let browser;
/** @type {import('node:http').Server} */
let receiver;
/** @type {{body: string, headers: import('node:http').IncomingHttpHeaders}[]} */
const received = [];
/** @type {number[]} the statuses the receiver answers next (then 204) */
const script = [];
const p = '/api/v1/projects/default';
/** @type {Record<string, string>} */
const ids = {};

before(async () => {
  receiver = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      received.push({ body, headers: req.headers });
      const status = script.shift() ?? 204;
      if (status === 429) res.setHeader('Retry-After', '30');
      res.writeHead(status);
      res.end(status === 204 ? undefined : 'slow down');
    });
  });
  await new Promise((resolve) => receiver.listen(0, '127.0.0.1', () => resolve(undefined)));
  const port = /** @type {import('node:net').AddressInfo} */ (receiver.address()).port;
  cf = await startCertfleet({ settings: { egress_allow_list: '127.0.0.1' } });
  const mk = async (/** @type {any} */ body) => {
    const r = await cf.api('POST', `${p}/notification-channels`, body);
    assert.equal(r.status, 201, r.text);
    return r.body.id;
  };
  ids.hook = await mk({ name: 'ops-hook', kind: 'webhook', url: `http://127.0.0.1:${port}/certfleet` });
  ids.mail = await mk({ name: 'ops-mail', kind: 'email', email: { host: 'smtp.example.com', username: 'certfleet', password: 'mail-Secret-9', from: 'certfleet@example.com', to: ['ops@example.com', 'oncall@example.com'] } });
  ids.slack = await mk({ name: 'ops-slack', kind: 'slack', slack: { webhook_url: 'https://hooks.slack.com/services/T0/B0/slack-Secret-9' } });
  for (const [event, channel, template] of /** @type {const} */ ([
    ['job.dead', ids.mail, { subject: '[certfleet] {{type}} died' }], ['distribution.finished', ids.hook, undefined],
    ['certificate.expiring', ids.slack, undefined]])) {
    const r = await cf.api('POST', `${p}/notification-rules`, { event, channel_id: channel, ...(template ? { template } : {}) });
    assert.equal(r.status, 201, r.text);
  }
  browser = await launch();
});
after(async () => {
  await browser?.close();
  await cf?.stop();
  await new Promise((resolve) => receiver?.close(() => resolve(undefined)));
});

test('channels and rules are listed without secrets; an admin sends a test and reads the answer', async () => {
  const page = await browser.newPage();
  const errors = collectErrors(page);
  await signIn(page, cf.url, cf.ownerToken);
  await page.getByRole('link', { name: 'Notifications' }).click();
  await page.waitForURL(/\/notifications(\?|$)/);
  const rows = page.locator('#channels tbody tr');
  await rows.first().waitFor();
  assert.equal(await rows.count(), 3);
  const mail = page.locator(`#channels tr[data-id="${ids.mail}"]`);
  assert.match(await mail.innerText(), /Email/);
  assert.match(await mail.innerText(), /ops@example\.com, oncall@example\.com via smtp\.example\.com:587/);
  assert.match(await mail.innerText(), /stored \(sealed\)/);
  assert.match(await page.locator(`#channels tr[data-id="${ids.slack}"]`).innerText(), /incoming webhook at hooks\.slack\.com/);
  const text = await page.locator('main').innerText();
  assert.doesNotMatch(text, /Secret-9/, 'no secret on the page');
  // Rules: event, the channel by name, the template or the default.
  const rules = page.locator('#rules tbody tr');
  assert.equal(await rules.count(), 3);
  const dead = rules.filter({ hasText: 'job.dead' });
  assert.match(await dead.innerText(), /ops-mail/);
  assert.match(await dead.innerText(), /Subject: \[certfleet\] \{\{type\}\} died/);
  assert.match(await rules.filter({ hasText: 'distribution.finished' }).innerText(), /ops-hook.*default/s);

  // A test message the receiver takes.
  const before = received.length;
  await page.locator(`#channels tr[data-id="${ids.hook}"]`).getByRole('button', { name: 'Send test to ops-hook' }).click();
  await page.locator('.feedback.ok', { hasText: 'delivered' }).waitFor();
  assert.match(await page.locator('.feedback').innerText(), /ops-hook: Test message delivered in \d+ ms\. Server: HTTP 204\./);
  assert.equal(received.length, before + 1);
  const sent = JSON.parse(received[received.length - 1].body);
  assert.equal(sent.event, 'notification.test');
  assert.equal(received[received.length - 1].headers['x-certfleet-event-id'], sent.event_id);
  await shot(page, 'notifications-test');

  // One it refuses: the class, the answer and what the queue would do, in red.
  script.push(429);
  await page.locator(`#channels tr[data-id="${ids.hook}"]`).getByRole('button', { name: 'Send test to ops-hook' }).click();
  const fail = page.locator('.feedback.error');
  await fail.waitFor();
  const why = await fail.innerText();
  assert.match(why, /ops-hook: Test message not delivered: \[io_transient\] 127\.0\.0\.1:\d+ answered HTTP 429/);
  assert.match(why, /wait 30 s/);
  assert.match(why, /would be retried/);
  assert.equal(await fail.getAttribute('role'), 'alert');
  assert.deepEqual(errors, []);
  await page.close();
});

test('a viewer sees the lists but no test button', async () => {
  const page = await browser.newPage();
  await signIn(page, cf.url, await cf.token('viewer', { name: 'watcher' }));
  await page.goto(`${cf.url}/notifications`);
  await page.locator('#channels tbody tr').first().waitFor();
  assert.equal(await page.locator('#channels tbody tr').count(), 3);
  assert.equal(await page.getByRole('button', { name: /Send test/ }).count(), 0);
  assert.equal(await page.locator('#channels thead th', { hasText: 'Actions' }).count(), 0);
  await page.close();
});
