// Shoots one page of Arize Phoenix's UI in headless Chromium (Debian's, or
// $CHROMIUM) through the `playwright-core` of web/ (`npm ci` there, which
// `cargo xtask test-env` runs).
//
//   node screenshot.mjs URL OUT.png TEXT
//
// Loads URL, waits until TEXT is on the page (the trace's spans have rendered),
// and writes the viewport to OUT.png. Exits non-zero when TEXT never shows.

import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const here = path.dirname(fileURLToPath(import.meta.url));
const web = path.resolve(here, '../../../../web/package.json');
const { chromium } = createRequire(web)('playwright-core');

const [url, out, text] = process.argv.slice(2);
if (!url || !out || !text) {
  console.error('usage: node screenshot.mjs URL OUT.png TEXT');
  process.exit(2);
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: [
    '--headless=new',
    '--no-sandbox',
    '--disable-gpu',
    '--no-first-run',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
  ],
  timeout: 30_000,
});
try {
  const page = await browser.newPage({ viewport: { width: 1600, height: 900 } });
  await page.goto(url, { waitUntil: 'networkidle', timeout: 60_000 });
  await page.getByText(text).first().waitFor({ timeout: 60_000 });
  await page.waitForLoadState('networkidle');
  await page.screenshot({ path: out });
  console.log(JSON.stringify({ ok: true, out }));
} finally {
  await browser.close();
}
