// A fixed-row-height virtual list: only the visible rows (and a few around them) are in the
// DOM, so 100,000 lines scroll like 100. The scroll height comes from two SVG spacers whose
// height is an attribute (CSP forbids style attributes).
import { h, svg } from './dom.js';

export const ROW_HEIGHT = 22; // px; app.css .vrow has the same height

/**
 * @template T
 * @param {{label: string, renderRow: (item: T, index: number) => HTMLElement, overscan?: number,
 *          onScrollState?: (atBottom: boolean, userScroll: boolean) => void}} opts
 */
export function virtualList(opts) {
  const overscan = opts.overscan ?? 10;
  const top = svg('svg', { width: 1, height: 0, class: 'vspacer', 'aria-hidden': 'true', focusable: 'false' });
  const bottom = svg('svg', { width: 1, height: 0, class: 'vspacer', 'aria-hidden': 'true', focusable: 'false' });
  const rows = h('div', { class: 'vrows', role: 'list' });
  const viewport = h('div', { class: 'vviewport', tabindex: '0', role: 'region', 'aria-label': opts.label }, top, rows, bottom);
  /** @type {T[]} */
  let items = [];
  // Where our own last scroll put the view (-1: none pending): a scroll event that finds the
  // view elsewhere was the user's, even when both landed in one event.
  let programmaticTop = -1;
  // The bottom (largest scrollTop) before rows were appended since the last scroll event: a
  // user who scrolled to the bottom just before new rows arrived is still "at the bottom".
  let bottomBeforeGrowth = Infinity;
  let frame = 0;
  let drawnCount = 0;
  let lastSetTop = -1; // scrollTop after our last scrollToBottom

  function draw() {
    frame = 0;
    const n = items.length;
    drawnCount = n;
    const height = viewport.clientHeight || 400;
    const first = Math.max(0, Math.floor(viewport.scrollTop / ROW_HEIGHT) - overscan);
    const last = Math.min(n, Math.ceil((viewport.scrollTop + height) / ROW_HEIGHT) + overscan);
    top.setAttribute('height', String(first * ROW_HEIGHT));
    bottom.setAttribute('height', String(Math.max(0, n - last) * ROW_HEIGHT));
    /** @type {HTMLElement[]} */
    const out = [];
    for (let i = first; i < last; ++i) out.push(opts.renderRow(items[i], i));
    rows.replaceChildren(...out);
  }
  function schedule() { if (!frame) frame = requestAnimationFrame(draw); }

  function atBottom() {
    return viewport.scrollTop + viewport.clientHeight >= viewport.scrollHeight - ROW_HEIGHT;
  }

  viewport.addEventListener('scroll', () => {
    const user = programmaticTop < 0 || Math.abs(viewport.scrollTop - programmaticTop) > 1;
    programmaticTop = -1;
    const bottom = atBottom() || viewport.scrollTop >= bottomBeforeGrowth - ROW_HEIGHT;
    bottomBeforeGrowth = Infinity;
    opts.onScrollState?.(bottom, user);
    schedule();
  });
  const ro = new ResizeObserver(() => schedule());
  ro.observe(viewport);

  return {
    el: viewport,
    /** @param {T[]} next */
    setItems(next) {
      // (The caller may append to the same array: compare with the count drawn last.)
      if (next.length > drawnCount) bottomBeforeGrowth = Math.min(bottomBeforeGrowth, viewport.scrollHeight - viewport.clientHeight);
      items = next;
      draw();
    },
    count() { return items.length; },
    redraw: draw,
    scrollToBottom() {
      const target = Math.max(0, items.length * ROW_HEIGHT - viewport.clientHeight);
      // The user scrolled up since our last scroll and its event has not come yet: that is a
      // pause, not something to scroll away from.
      if (lastSetTop >= 0 && lastSetTop <= target && viewport.scrollTop < lastSetTop - 1) {
        lastSetTop = -1;
        opts.onScrollState?.(false, true);
        draw();
        return;
      }
      if (Math.abs(viewport.scrollTop - target) > 1) {
        programmaticTop = target;
        viewport.scrollTop = target;
      }
      lastSetTop = viewport.scrollTop;
      draw();
    },
    atBottom,
    dispose() { ro.disconnect(); if (frame) cancelAnimationFrame(frame); },
  };
}
