// Parses a mermaid diagram with mermaid itself and prints the texts it
// would draw for messages and notes, one per line, entity codes decoded.
// Used by report/mermaid_test.go when CREW_MERMAID_DIR is set: run it from
// a directory where `npm install mermaid jsdom` was done.
import fs from 'fs';
import { createRequire } from 'module';
// Resolve packages from the working directory, not from this file's.
const require = createRequire(process.cwd() + '/');
const { JSDOM } = require('jsdom');
const dom = new JSDOM('<!doctype html><html><body></body></html>');
globalThis.window = dom.window;
globalThis.document = dom.window.document;
const { default: mermaid } = await import(require.resolve('mermaid'));
mermaid.initialize({ startOnLoad: false });
const text = fs.readFileSync(process.argv[2], 'utf8');
await mermaid.parse(text); // throws on a diagram mermaid rejects
// What mermaid.render does before it lexes (encodeEntities).
const enc = text
  .replace(/style.*:\S*#.*;/g, (s) => s.substring(0, s.length - 1))
  .replace(/classDef.*:\S*#.*;/g, (s) => s.substring(0, s.length - 1))
  .replace(/#\w+;/g, (s) => {
    const inner = s.substring(1, s.length - 1);
    return /^\+?\d+$/.test(inner) ? 'ﬂ°°' + inner + '¶ß' : 'ﬂ°' + inner + '¶ß';
  });
const d = await mermaid.mermaidAPI.getDiagramFromText(enc);
const named = { quot: '"', lt: '<', gt: '>', amp: '&' };
const dec = (s) => s
  .replace(/ﬂ°°(\d+)¶ß/g, (_, n) => String.fromCodePoint(+n))
  .replace(/ﬂ°(\w+)¶ß/g, (_, n) => named[n] ?? '\uFFFD');
for (const m of d.db.getMessages()) {
  if (m.message === undefined || m.message === null) continue;
  const t = typeof m.message === 'string' ? m.message : m.message.text ?? '';
  if (t !== '') console.log(dec(t));
}
