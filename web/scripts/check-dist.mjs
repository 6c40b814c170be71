// After `vite build`: the output must be exactly index.html, assets/app.js and
// assets/app.css (the files agent-server embeds), with no source maps and no
// reference to another origin. Prints each file's size, raw and gzip.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { gzipSync } from 'node:zlib';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

// Where vite.config.js wrote: $AGENT_WEB_OUT (relative to web/) or the default.
const web = fileURLToPath(new URL('..', import.meta.url));
const dist = resolve(web, process.env.AGENT_WEB_OUT || '../crates/agent-server/web-dist');
const expected = ['assets/app.css', 'assets/app.js', 'index.html'];

function walk(dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? walk(path) : [relative(dist, path).split('\\').join('/')];
  });
}

const found = walk(dist).sort();
if (JSON.stringify(found) !== JSON.stringify(expected)) {
  console.error(`web-dist must hold exactly ${expected.join(', ')}; found ${found.join(', ') || 'nothing'}`);
  process.exit(1);
}
const html = readFileSync(join(dist, 'index.html'), 'utf8');
for (const ref of ['/assets/app.js', '/assets/app.css']) {
  if (!html.includes(ref)) {
    console.error(`index.html does not reference ${ref}`);
    process.exit(1);
  }
}
let total = 0;
let totalGz = 0;
for (const file of expected) {
  const bytes = readFileSync(join(dist, file));
  const text = bytes.toString('utf8');
  if (/sourceMappingURL/.test(text)) {
    console.error(`${file} references a source map`);
    process.exit(1);
  }
  // Loads from another origin (scripts, styles, fonts, imports) are not allowed.
  if (/<(script|link)[^>]+(src|href)="(https?:)?\/\//i.test(text) || /@import\s+url\(\s*["']?https?:/i.test(text) || /url\(\s*["']?https?:/i.test(text)) {
    console.error(`${file} loads something from another origin`);
    process.exit(1);
  }
  const gz = gzipSync(bytes, { level: 9 }).length;
  total += bytes.length;
  totalGz += gz;
  console.log(`${file.padEnd(16)} ${String(bytes.length).padStart(8)} B  gzip ${String(gz).padStart(7)} B`);
}
console.log(`${'total'.padEnd(16)} ${String(total).padStart(8)} B  gzip ${String(totalGz).padStart(7)} B`);
