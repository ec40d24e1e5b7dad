// Markdown rendering for replies: marked for the syntax, highlight.js for
// code blocks (a few common languages), DOMPurify for safety.

import { Marked } from 'marked';
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

const marked = new Marked({
  gfm: true,
  breaks: false,
  renderer: {
    code({ text, lang }) {
      const language = (lang ?? '').trim().split(/\s+/)[0];
      const known = language && hljs.getLanguage(language);
      const html = known ? hljs.highlight(text, { language, ignoreIllegals: true }).value : hljs.highlightAuto(text).value;
      const label = known ? language : '';
      return `<div class="code"><div class="code-bar"><span>${label}</span><button type="button" class="copy" data-copy>Copy</button></div><pre><code class="hljs">${html}</code></pre></div>`;
    },
  },
});

/** render turns markdown into sanitized HTML. */
export function render(md: string): string {
  const html = marked.parse(md, { async: false }) as string;
  return DOMPurify.sanitize(html, { ADD_ATTR: ['data-copy'] });
}

/** wireCopy makes the Copy buttons of code blocks under root work. */
export function wireCopy(root: HTMLElement): void {
  root.addEventListener('click', async (e) => {
    const btn = (e.target as HTMLElement).closest('button[data-copy]');
    if (!btn) return;
    const code = btn.closest('.code')?.querySelector('code')?.textContent ?? '';
    try {
      await navigator.clipboard.writeText(code);
      btn.textContent = 'Copied';
    } catch {
      btn.textContent = 'Copy failed';
    }
    setTimeout(() => (btn.textContent = 'Copy'), 1500);
  });
}
