// Sign in with an API token; the session cookie is set by the server (HttpOnly).
import * as api from './api.js';
import { h, replace } from './dom.js';
import { navigate } from './router.js';
import * as session from './session.js';

/** @param {import('./router.js').PageContext} ctx @returns {import('./router.js').PageHandle} */
export function renderLogin(ctx) {
  const input = h('input', { id: 'token', name: 'token', type: 'password', autocomplete: 'off', required: true, spellcheck: 'false', 'aria-describedby': 'token-help login-error' });
  const error = h('p', { class: 'field-error', id: 'login-error', role: 'alert' });
  const button = h('button', { type: 'submit', class: 'primary', text: 'Sign in' });
  // Sent here by a call the server refused with 401 (issue 31): say why, and that the action
  // taken then was not done; after sign-in the page it was on opens again.
  const next = ctx.query.get('next');
  const nextOk = next && next.startsWith('/') && !next.startsWith('//') && !next.startsWith('/login') ? next : null;
  const expired = ctx.query.get('reason') === 'expired'
    ? h('p', { class: 'alert warn', id: 'session-ended', role: 'status' },
      'Your session ended: it expired, was signed out elsewhere, or its token was revoked. ',
      'Whatever was clicked just then was not done. ',
      nextOk ? `Sign in again to return to ${nextOk}.` : 'Sign in again.')
    : null;
  const form = h('form', { class: 'login-form' },
    h('h1', { text: 'Sign in to certfleet' }), expired,
    h('label', { for: 'token', text: 'API token' }), input,
    h('p', { class: 'muted', id: 'token-help', text: 'A token from `certfleet token create` (it starts with cf_). It is sent once; the browser keeps only a session cookie.' }),
    error, button);
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    error.textContent = '';
    button.disabled = true;
    try {
      await session.signIn(input.value.trim());
      navigate(nextOk ?? '/dashboard', { replace: true });
    } catch (e) {
      error.textContent = api.errorText(e);
      input.setAttribute('aria-invalid', 'true');
      input.focus();
    } finally {
      button.disabled = false;
    }
  });
  replace(ctx.root, h('div', { class: 'login-wrap' }, form));
  input.focus();
  return {};
}
