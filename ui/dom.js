// Tiny helpers to build elements. Data only ever goes in as text nodes or attribute values
// (never innerHTML), so nothing from the API can become markup.

/**
 * @typedef {string | number | Node | null | undefined | false} Child
 * @typedef {{[name: string]: string | number | boolean | null | undefined | EventListener}} Attrs
 */

/**
 * Builds an element. `attrs`: `class`, `text`, `on<event>` listeners, boolean attributes
 * (true: present, false/null/undefined: absent), `value` set as a property; anything else via
 * setAttribute.
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag
 * @param {Attrs | null} [attrs]
 * @param {...(Child | Child[])} children
 * @returns {HTMLElementTagNameMap[K]}
 */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k.startsWith('on') && typeof v === 'function') {
        el.addEventListener(k.slice(2), /** @type {EventListener} */ (v));
      } else if (k === 'text') {
        el.textContent = String(v);
      } else if (k === 'value' && 'value' in el) {
        /** @type {HTMLInputElement} */ (/** @type {unknown} */ (el)).value = String(v);
      } else if (v === true) {
        el.setAttribute(k, '');
      } else {
        el.setAttribute(k, String(v));
      }
    }
  }
  append(el, children);
  return el;
}

/**
 * @param {Element} el
 * @param {(Child | Child[])[]} children
 */
export function append(el, children) {
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

/**
 * Replaces an element's children.
 * @param {Element} el
 * @param {...(Child | Child[])} children
 */
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
}

/**
 * An SVG element (for spacers whose size is an attribute, never a style: CSP allows it).
 * @param {string} tag
 * @param {{[name: string]: string | number}} attrs
 * @returns {SVGElement}
 */
export function svg(tag, attrs) {
  const el = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  return /** @type {SVGElement} */ (el);
}

/**
 * @param {string} selector
 * @param {ParentNode} [root]
 * @returns {HTMLElement}
 */
export function $(selector, root = document) {
  const el = root.querySelector(selector);
  if (!(el instanceof HTMLElement)) throw new Error(`no element ${selector}`);
  return el;
}

/**
 * A table row that opens `link` when clicked anywhere but on a link, a button or a field of its own.
 * @param {HTMLElement} tr @param {string} link @param {(url: string) => void} open
 */
export function openOnClick(tr, link, open) {
  tr.addEventListener('click', (ev) => {
    if (!(ev.target instanceof Element && ev.target.closest('a, button, input, label, select, .select-cell'))) open(link);
  });
  return tr;
}

/**
 * Turns a status line into an error alert with `text` (a failed read: the API's message).
 * @param {HTMLElement} el @param {string} text
 */
export function showAlert(el, text) {
  el.hidden = false;
  el.className = 'alert error';
  el.setAttribute('role', 'alert');
  el.textContent = text;
}
