// After `vite build`: the output must be exactly index.html, assets/app.js,
// assets/app.css and assets/highlight.js (the files agent-server embeds; the
// last one is the formatter, markdown parser and syntax highlighter, loaded on
// demand), with no source maps and no reference to another origin, and the
// first load (index.html, app.js, app.css) must stay under its gzip budget.
// Prints each file's size, raw and gzip.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { gzipSync } from 'node:zlib';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

// Where vite.config.js wrote: $AGENT_WEB_OUT (relative to web/) or the default.
const web = fileURLToPath(new URL('..', import.meta.url));
const dist = resolve(web, process.env.AGENT_WEB_OUT || '../crates/agent-server/web-dist');
const expected = ['assets/app.css', 'assets/app.js', 'assets/highlight.js', 'index.html'];
const firstLoad = ['index.html', 'assets/app.js', 'assets/app.css'];
/** Gzipped bytes the first load may take. */
const FIRST_LOAD_BUDGET = 200 * 1024;

function fail(message) {
  console.error(message);
  process.exit(1);
}

function walk(dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? walk(path) : [relative(dist, path).split('\\').join('/')];
  });
}

const found = walk(dist).sort();
if (JSON.stringify(found) !== JSON.stringify(expected)) {
  fail(`web-dist must hold exactly ${expected.join(', ')}; found ${found.join(', ') || 'nothing'}`);
}
const html = readFileSync(join(dist, 'index.html'), 'utf8');
for (const ref of ['/assets/app.js', '/assets/app.css']) {
  if (!html.includes(ref)) fail(`index.html does not reference ${ref}`);
}
if (html.includes('highlight.js')) fail('index.html must not load the formatter (it is loaded on demand)');
const app = readFileSync(join(dist, 'assets/app.js'), 'utf8');
if (!app.includes('import(`./highlight.js`)') && !app.includes('import("./highlight.js")')) {
  fail('assets/app.js does not import ./highlight.js on demand');
}
const lazy = readFileSync(join(dist, 'assets/highlight.js'), 'utf8');
// Its static imports: the statements the bundler puts at the top of the module
// (`import{a as b}from"./app.js";`, `import"./x.js";`). The grammars' own
// words ("import", "from") further down are not imports.
const imports = [];
for (const head = /\s*import\s*(?:(?:\{[^}]*\}|\*\s*as\s+[\w$]+|[\w$]+(?:\s*,\s*\{[^}]*\})?)\s*from\s*)?["'`]([^"'`]+)["'`]\s*;?/y; ; ) {
  const m = head.exec(lazy);
  if (!m) break;
  imports.push(m[1]);
}
if (imports.some((i) => i !== './app.js')) fail(`assets/highlight.js imports ${imports.join(', ')} (only ./app.js may be)`);

let total = 0;
let totalGz = 0;
let firstGz = 0;
for (const file of expected) {
  const bytes = readFileSync(join(dist, file));
  const text = bytes.toString('utf8');
  if (/sourceMappingURL/.test(text)) fail(`${file} references a source map`);
  // Loads from another origin (scripts, styles, fonts, imports) are not allowed.
  if (/<(script|link)[^>]+(src|href)="(https?:)?\/\//i.test(text) || /@import\s+url\(\s*["']?https?:/i.test(text) || /url\(\s*["']?https?:/i.test(text)) {
    fail(`${file} loads something from another origin`);
  }
  const gz = gzipSync(bytes, { level: 9 }).length;
  total += bytes.length;
  totalGz += gz;
  if (firstLoad.includes(file)) firstGz += gz;
  console.log(`${file.padEnd(20)} ${String(bytes.length).padStart(8)} B  gzip ${String(gz).padStart(7)} B`);
}
console.log(`${'total'.padEnd(20)} ${String(total).padStart(8)} B  gzip ${String(totalGz).padStart(7)} B`);
console.log(`${'first load'.padEnd(20)} ${''.padStart(8)}    gzip ${String(firstGz).padStart(7)} B (budget ${FIRST_LOAD_BUDGET} B)`);
if (firstGz > FIRST_LOAD_BUDGET) fail(`the first load is ${firstGz} B gzipped, over the budget of ${FIRST_LOAD_BUDGET} B`);
