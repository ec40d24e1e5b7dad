// Links leave the app: a click on an http(s) or mailto link anywhere in
// the UI opens the system browser (the desktop shell's BrowserOpenURL, or
// a new tab in a browser). The app's own page is never replaced.

import { conn, shell } from './api';

export async function openExternal(url: string): Promise<void> {
  if (conn.shell) {
    try {
      await shell('open', { url });
      return;
    } catch {
      // Fall back to the webview's own handling of a new window.
    }
  }
  window.open(url, '_blank', 'noopener,noreferrer');
}

/** wireLinks routes clicks on external links through openExternal. */
export function wireLinks(): void {
  document.addEventListener('click', (e) => {
    const a = (e.target as Element | null)?.closest?.('a[href]') as HTMLAnchorElement | null;
    if (!a || e.defaultPrevented || e.button !== 0) return;
    const href = a.getAttribute('href') ?? '';
    if (href.startsWith('#/')) return; // the app's own routes
    if (href.startsWith('#')) {
      // An in-page anchor (skip link, footnote): focus it, keep the route.
      e.preventDefault();
      const el = document.getElementById(decodeURIComponent(href.slice(1)));
      if (el) {
        if (!el.hasAttribute('tabindex')) el.setAttribute('tabindex', '-1');
        el.focus();
        el.scrollIntoView({ block: 'start' });
      }
      return;
    }
    let url: URL;
    try {
      url = new URL(href, location.href);
    } catch {
      e.preventDefault();
      return;
    }
    e.preventDefault();
    if (['http:', 'https:', 'mailto:'].includes(url.protocol) && url.origin !== location.origin) openExternal(url.toString());
  });
}
