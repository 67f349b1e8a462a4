// Widgets every page shares: the feedback line, the confirmation dialog of an action that cannot
// be undone, the pager, a form's field errors. Pages build their own content; these only carry
// what must look and act the same everywhere.
import * as api from './api.js';
import { h, replace } from './dom.js';
import { navigate } from './router.js';

/**
 * The feedback line of a page: one polite live region; errors in red with role=alert.
 * @returns {{el: HTMLElement, ok: (text: string, ...extra: (Node|string)[]) => void,
 *            fail: (text: string, ...extra: (Node|string)[]) => void, clear: () => void}}
 */
export function feedback() {
  const el = h('div', { class: 'feedback', role: 'status', 'aria-live': 'polite' });
  return {
    el,
    ok(text, ...extra) { el.className = 'feedback ok'; el.setAttribute('role', 'status'); replace(el, h('span', { class: 'feedback-text', text }), ...extra); },
    fail(text, ...extra) { el.className = 'feedback error'; el.setAttribute('role', 'alert'); replace(el, h('span', { class: 'feedback-text', text }), ...extra); },
    clear() { el.className = 'feedback'; el.replaceChildren(); },
  };
}

/**
 * Asks before an action that cannot be undone (Cancel, Rollback, Revoke, Delete): a modal dialog
 * that names the object, with the action's own words on the button, and any fields the action
 * takes (`fields`, read by the caller once this resolves true). Resolves true only for that
 * button; Escape, the other button and closing resolve false. Focus returns to what had it.
 * `undoable`: the action can be taken back or does no harm when repeated (a renewal): its button
 * is not styled as a destructive one.
 * @param {{title: string, text: string, confirm: string, keep?: string, fields?: HTMLElement, undoable?: boolean}} o
 * @returns {Promise<boolean>}
 */
export function confirmAction(o) {
  const back = document.activeElement instanceof HTMLElement ? document.activeElement : null;
  const yes = h('button', { type: 'button', class: o.undoable ? 'primary' : 'danger', 'data-confirm': 'yes', text: o.confirm });
  const no = h('button', { type: 'button', 'data-confirm': 'no', text: o.keep ?? 'Keep it' });
  const dialog = h('dialog', { class: 'confirm-dialog', 'aria-labelledby': 'confirm-title', 'aria-describedby': 'confirm-text' },
    h('h2', { id: 'confirm-title', text: o.title }),
    h('p', { id: 'confirm-text', text: o.text }),
    o.fields ?? null,
    h('div', { class: 'dialog-buttons' }, no, yes));
  document.body.append(dialog);
  return new Promise((resolve) => {
    let answer = false;
    yes.addEventListener('click', () => { answer = true; dialog.close(); });
    no.addEventListener('click', () => dialog.close());
    dialog.addEventListener('close', () => {
      dialog.remove();
      if (back?.isConnected) back.focus();
      resolve(answer);
    });
    dialog.showModal();
    // The harmless choice has the focus: Enter on a dialog opened by mistake keeps the job.
    no.focus();
  });
}

/**
 * First · Previous · "Page N of M" · Next · Last, and a page-number box, for a list page;
 * `link(n)` is page n's URL.
 * @param {number} page @param {number} pages @param {(n: number) => string} link
 * @returns {Array<HTMLElement | null>}
 */
export function pagerLinks(page, pages, link) {
  const box = h('input', { type: 'number', min: '1', max: String(pages), value: String(page), class: 'page-input', 'aria-label': `Page number, 1 to ${pages}`, inputmode: 'numeric' });
  const form = h('form', { class: 'page-jump' }, box, h('button', { type: 'submit', text: 'Go to page' }));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const n = Number.parseInt(box.value, 10);
    if (Number.isFinite(n)) navigate(link(Math.min(pages, Math.max(1, n))));
  });
  return [
    page > 1 ? h('a', { href: link(1), text: 'First' }) : null,
    page > 1 ? h('a', { href: link(page - 1), rel: 'prev', text: 'Previous' }) : null,
    h('span', { class: 'page-no', text: `Page ${page} of ${pages}` }),
    page < pages ? h('a', { href: link(page + 1), rel: 'next', text: 'Next' }) : null,
    page < pages ? h('a', { href: link(pages), text: 'Last' }) : null,
    pages > 2 ? form : null,
  ];
}

/**
 * The pager of a list page, filled for page `page` of `pages`; a page past the last (an old
 * link, `?page=999999`) goes to the last page instead of showing "Page 999999 of 2115": true
 * when it went there.
 * @param {HTMLElement} pager @param {number} page @param {number} pages @param {(n: number) => string} link
 */
export function fillPager(pager, page, pages, link) {
  if (page > pages) {
    navigate(link(pages), { replace: true });
    return true;
  }
  replace(pager, ...pagerLinks(page, pages, link));
  return false;
}

/**
 * How many pages a list answer ({total, page_size}) has; at least one.
 * @param {{total?: number, page_size?: number}} answer
 */
export function pageCount(answer) {
  return Math.max(1, Math.ceil((answer.total ?? 0) / (answer.page_size || 1)));
}

/**
 * A wide table's own scrolling box: focusable and named, so a keyboard can scroll it (axe
 * `scrollable-region-focusable`) while the page itself never scrolls sideways. Its name must
 * differ from its section's ("Rules table" in "Rules"): two regions of one name are axe's
 * `landmark-unique`.
 * @param {string} label @param {...import('./dom.js').Child} children
 */
export function scrollRegion(label, ...children) {
  return h('div', { class: 'table-wrap', tabindex: '0', role: 'region', 'aria-label': label }, ...children);
}

/**
 * A form's field errors, as the API names fields ("auth.password", "powerdns.api_url",
 * "exec.env.TOKEN"): the message goes under the form's `[data-field-error]` element of that name,
 * or of the nearest enclosing one ("auth" for "auth.password"), and the input beside it is marked
 * invalid and focused; a field the form does not show goes to `formError`.
 * @param {HTMLElement | null} form @param {HTMLElement} formError
 */
export function fieldErrors(form, formError) {
  return {
    clear() {
      formError.textContent = '';
      for (const p of form?.querySelectorAll('[data-field-error]') ?? []) p.textContent = '';
      for (const el of form?.querySelectorAll('[aria-invalid]') ?? []) el.removeAttribute('aria-invalid');
    },
    /** @param {string} field @param {string} message */
    show(field, message) {
      const all = [...(form?.querySelectorAll('[data-field-error]') ?? [])];
      const target = all.find((p) => p.getAttribute('data-field-error') === field)
        ?? all.find((p) => field.startsWith(`${p.getAttribute('data-field-error')}.`) || field.startsWith(`${p.getAttribute('data-field-error')}[`));
      if (!target) {
        formError.textContent = message;
        return;
      }
      target.textContent = message;
      const input = /** @type {HTMLElement | null} */ (target.parentElement?.querySelector('input, textarea, select') ?? null);
      input?.setAttribute('aria-invalid', 'true');
      input?.focus();
    },
  };
}

/**
 * A list row's Delete: asks first (`ask`, the confirmation's words), then DELETEs `path`; the
 * feedback line says `done` and the list reloads, or says why not (the button is usable again).
 * @param {{name: string, path: string, ask: {title: string, text: string, confirm: string}, done: string,
 *          fb: ReturnType<typeof feedback>, reload: () => void}} o
 */
export function deleteButton(o) {
  const b = h('button', { type: 'button', class: 'action danger', 'data-action': 'delete', text: 'Delete', 'aria-label': `Delete ${o.name}` });
  b.addEventListener('click', async () => {
    if (!(await confirmAction(o.ask))) return;
    b.disabled = true;
    try {
      await api.del(o.path);
      o.fb.ok(o.done);
      o.reload();
    } catch (e) {
      o.fb.fail(`${o.name}: ${api.errorText(e)}`);
      b.disabled = false;
    }
  });
  return b;
}
