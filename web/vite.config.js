// Builds the chat page that `agent serve` embeds: exactly index.html,
// assets/app.js, assets/app.css and assets/highlight.js in
// ../crates/agent-server/web-dist (or $AGENT_WEB_OUT), with fixed names (no
// hashes), no source maps, no public/ copies and no preload polyfill, so the
// output is byte-identical from the same lockfile and can be included in the
// binary as is. The one split is the formatter (src/highlight.ts: the markdown
// parser and the syntax highlighter), imported on demand the first time an
// answer shows text, by the page and by its formatting worker (which runs
// assets/app.js itself, src/offload.ts); anything else that would make another
// file fails the build (scripts/check-dist.mjs).
//
// Dev: `npm run dev` proxies /api to a running `agent serve` (AGENT_URL,
// default http://127.0.0.1:8787). That server checks Host and Origin on
// loopback, so the proxy sends Host as the target's and drops Origin.
import { defineConfig } from 'vite';
import { fileURLToPath } from 'node:url';

const target = process.env.AGENT_URL || 'http://127.0.0.1:8787';
// `cargo xtask web --check` builds elsewhere (AGENT_WEB_OUT) and compares.
const outDir = process.env.AGENT_WEB_OUT || '../crates/agent-server/web-dist';

const proxy = {
  '/api': {
    target,
    changeOrigin: true, // Host: the target's host:port
    configure(proxyServer) {
      proxyServer.on('proxyReq', (req) => {
        req.removeHeader('origin');
        req.removeHeader('referer');
      });
    },
  },
};

export default defineConfig({
  base: '/',
  resolve: {
    alias: {
      // The markdown parser's entity decoder without its DOM variant (which
      // makes an element when it loads): the parser also runs in the
      // formatting worker (src/offload.ts), which has no document.
      'decode-named-character-reference': fileURLToPath(
        new URL('./node_modules/decode-named-character-reference/index.js', import.meta.url),
      ),
    },
  },
  publicDir: false,
  clearScreen: false,
  oxc: {
    jsx: { runtime: 'automatic', importSource: 'react' },
  },
  server: { host: '127.0.0.1', proxy },
  preview: { host: '127.0.0.1', proxy },
  build: {
    outDir,
    emptyOutDir: true,
    assetsDir: 'assets',
    sourcemap: false,
    cssCodeSplit: false,
    modulePreload: false,
    reportCompressedSize: false,
    // The budget that matters is the first load's gzip size (scripts/check-dist.mjs).
    chunkSizeWarningLimit: 1024,
    copyPublicDir: false,
    // Anything imported as an asset (none today) is inlined, never emitted.
    assetsInlineLimit: () => true,
    target: 'es2022',
    license: false,
    rolldownOptions: {
      // swr (inside @ai-sdk/react) starts with 'use client', which means nothing here.
      onwarn(warning, warn) {
        if (warning.code === 'MODULE_LEVEL_DIRECTIVE') return;
        warn(warning);
      },
      output: {
        entryFileNames: 'assets/app.js',
        // The lazy chunk of src/highlight.ts (the formatter): assets/highlight.js.
        chunkFileNames: 'assets/[name].js',
        assetFileNames: (info) =>
          (info.names ?? []).some((n) => n.endsWith('.css')) ? 'assets/app.css' : 'assets/[name][extname]',
      },
    },
  },
});
