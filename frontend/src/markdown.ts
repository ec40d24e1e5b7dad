// Markdown rendering for replies: marked for the syntax, highlight.js for
// code blocks that name one of a few common languages (others stay plain),
// DOMPurify for safety.
//
// Model output is untrusted. Links carry their URL for the click handler
// (links.ts opens them in the system browser; the app never navigates).
// Images are never fetched from a remote host: a remote image becomes a
// labelled placeholder with a link, and every image shown has alt text.
//
// MarkdownView renders a streamed reply incrementally: blocks that are
// complete are rendered and sanitized once, only the open block at the end
// is rendered again as text arrives.

import { Marked, type Token, type Tokens } from 'marked';
import DOMPurify from 'dompurify';
import hljs from 'highlight.js/lib/core';
import python from 'highlight.js/lib/languages/python';
import javascript from 'highlight.js/lib/languages/javascript';
import typescript from 'highlight.js/lib/languages/typescript';
import go from 'highlight.js/lib/languages/go';
import bash from 'highlight.js/lib/languages/bash';
import json from 'highlight.js/lib/languages/json';
import sql from 'highlight.js/lib/languages/sql';
import c from 'highlight.js/lib/languages/c';
import rust from 'highlight.js/lib/languages/rust';
import xml from 'highlight.js/lib/languages/xml';
import css from 'highlight.js/lib/languages/css';
import yaml from 'highlight.js/lib/languages/yaml';

for (const [name, lang] of Object.entries({ python, javascript, typescript, go, bash, json, sql, c, rust, xml, css, yaml })) {
  hljs.registerLanguage(name, lang);
}
hljs.registerAliases(['py'], { languageName: 'python' });
hljs.registerAliases(['js'], { languageName: 'javascript' });
hljs.registerAliases(['ts'], { languageName: 'typescript' });
hljs.registerAliases(['sh', 'shell', 'zsh'], { languageName: 'bash' });
hljs.registerAliases(['html'], { languageName: 'xml' });

function escapeHTML(s: string): string {
  return s.replace(/[&<>"']/g, (ch) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[ch]!);
}

/** localImage reports whether src can be shown without a fetch from
 * another host (an inline data: image). */
function localImage(src: string): boolean {
  return /^data:image\/(png|jpe?g|gif|webp|avif);/i.test(src.trim());
}

const noDescription = 'Image without a description';

/** imageHTML is an image of model output: inline data shown with alt text,
 * anything else a placeholder that names the host and links to it. */
function imageHTML(src: string, alt: string): string {
  const label = alt.trim() || noDescription;
  if (localImage(src)) return `<img src="${escapeHTML(src)}" alt="${escapeHTML(label)}">`;
  let host = '';
  try {
    host = new URL(src, 'https://invalid.example/').host;
  } catch {
    // Not a URL: no link.
  }
  const link = host && /^https?:/i.test(src) ? ` <a href="${escapeHTML(src)}">${escapeHTML(host)}</a>` : '';
  return `<span class="ext-image" role="img" aria-label="${escapeHTML('Image not loaded: ' + label)}">Image not loaded: ${escapeHTML(label)}${link}</span>`;
}

function codeHTML(text: string, lang: string | undefined): string {
  const language = (lang ?? '').trim().split(/\s+/)[0];
  const known = language && hljs.getLanguage(language);
  // A block without a language stays plain: guessing one tries every
  // grammar (the costliest work of a render), and such blocks are mostly
  // program output.
  const html = known ? hljs.highlight(text, { language, ignoreIllegals: true }).value : escapeHTML(text);
  const label = known ? language : '';
  return `<div class="code"><div class="code-bar"><span>${escapeHTML(label)}</span><button type="button" class="copy" data-copy aria-label="Copy code">Copy</button></div><pre><code class="hljs" tabindex="0">${html}</code></pre></div>`;
}

const marked = new Marked({
  gfm: true,
  breaks: false,
  renderer: {
    code({ text, lang }: Tokens.Code) {
      return codeHTML(text, lang);
    },
    image({ href, text }: Tokens.Image) {
      return imageHTML(href, text);
    },
    link({ href, title, tokens }: Tokens.Link) {
      const inner = this.parser.parseInline(tokens);
      const t = title ? ` title="${escapeHTML(title)}"` : '';
      return `<a href="${escapeHTML(href)}"${t} rel="noopener noreferrer" target="_blank">${inner}</a>`;
    },
  },
});

// Raw HTML in model output: an <img> that would fetch loses its src here,
// in DOMPurify's inert document, before anything reaches the page.
DOMPurify.addHook('afterSanitizeAttributes', (node) => {
  if (node.tagName === 'IMG') {
    const src = node.getAttribute('src') ?? '';
    if (!localImage(src)) {
      node.removeAttribute('src');
      node.removeAttribute('srcset');
      node.setAttribute('data-blocked-src', src);
    }
    if (!node.getAttribute('alt')?.trim()) node.setAttribute('alt', noDescription);
  }
  if (node.tagName === 'A' && node.hasAttribute('href')) {
    node.setAttribute('rel', 'noopener noreferrer');
    node.setAttribute('target', '_blank');
  }
});

const purifyOptions = { ADD_ATTR: ['data-copy', 'target'], FORBID_TAGS: ['style', 'form', 'input', 'textarea', 'select'], ALLOW_UNKNOWN_PROTOCOLS: false };

function sanitize(html: string): string {
  return DOMPurify.sanitize(html, purifyOptions);
}

/** blockHTML renders and sanitizes block tokens. */
function blockHTML(tokens: Token[]): string {
  return sanitize(marked.parser(tokens));
}

/** placeImages turns images whose src was removed into placeholders. */
function placeImages(root: ParentNode): void {
  for (const img of root.querySelectorAll<HTMLImageElement>('img[data-blocked-src]')) {
    const span = document.createElement('span');
    span.innerHTML = sanitize(imageHTML(img.dataset.blockedSrc ?? '', img.alt === noDescription ? '' : img.alt));
    img.replaceWith(...span.childNodes);
  }
}

/** MarkdownView shows markdown that grows at its end. */
export class MarkdownView {
  readonly el: HTMLElement;
  private frozen: HTMLElement;
  private live: HTMLElement;
  private source = '';
  private frozenLen = 0;

  constructor(className = 'markdown') {
    this.el = document.createElement('div');
    this.el.className = className;
    this.frozen = document.createElement('div');
    this.frozen.className = 'md-frozen';
    this.live = document.createElement('div');
    this.live.className = 'md-live';
    this.el.append(this.frozen, this.live);
  }

  /** update shows md. When md extends what was shown, only the blocks
   * after the last complete one are rendered again. */
  update(md: string, streaming = true): void {
    md = md.replace(/\r\n?/g, '\n');
    if (!md.startsWith(this.source.slice(0, this.frozenLen))) {
      this.frozen.replaceChildren();
      this.frozenLen = 0;
    }
    this.source = md;
    const tokens = marked.lexer(md.slice(this.frozenLen));
    let last = tokens.length - 1;
    while (last >= 0 && tokens[last].type === 'space') last--;
    // Every block before the last one is complete: a later line can only
    // extend (or turn into something else) the last block.
    const done = streaming ? Math.max(0, last) : tokens.length;
    if (done > 0) {
      const complete = tokens.slice(0, done);
      this.frozen.insertAdjacentHTML('beforeend', blockHTML(complete));
      placeImages(this.frozen);
      this.frozenLen += complete.reduce((n, t) => n + t.raw.length, 0);
    }
    this.live.innerHTML = done < tokens.length ? blockHTML(tokens.slice(done)) : '';
    placeImages(this.live);
  }

  /** finish renders the end of the reply for good. Reference-style link
   * definitions apply to the whole text, so a reply with one is rendered
   * again as a whole, once. */
  finish(md: string): void {
    if (/^ {0,3}\[[^\]]+\]:\s*\S/m.test(md)) {
      this.frozen.replaceChildren();
      this.frozenLen = 0;
    }
    this.update(md, false);
  }
}

/** wireCopy makes the Copy buttons of code blocks under root work. */
export function wireCopy(root: HTMLElement): void {
  root.addEventListener('click', async (e) => {
    const btn = (e.target as HTMLElement).closest('button[data-copy]');
    if (!btn) return;
    const code = btn.closest('.code')?.querySelector('code')?.textContent ?? '';
    btn.textContent = (await copyText(code)) ? 'Copied' : 'Copy failed';
    setTimeout(() => (btn.textContent = 'Copy'), 1500);
  });
}

/** copyText puts text on the clipboard; it reports whether it could. */
export async function copyText(text: string): Promise<boolean> {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    // Some webviews have no async clipboard: fall back to a selection.
    const ta = document.createElement('textarea');
    ta.value = text;
    ta.setAttribute('readonly', '');
    ta.style.position = 'fixed';
    ta.style.opacity = '0';
    document.body.append(ta);
    ta.select();
    const ok = document.execCommand('copy');
    ta.remove();
    return ok;
  }
}
