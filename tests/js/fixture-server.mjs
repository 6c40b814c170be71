#!/usr/bin/env node
// Tiny HTTP server that replays canned chat streams. It exists for
// selftest.mjs (and for poking at check-stream.mjs by hand); the Rust tests
// run check-stream.mjs against the real agent-server instead.
//
// A fixture is { status?, headers?, body, delayMs? }: `body` is a string or an
// array of strings written one after another, waiting `delayMs` between
// pieces. `POST /<name>` (any method, query string ignored) replays fixture
// <name>; anything else gets a 404.
//
// Standalone: node fixture-server.mjs FIXTURES.json [--port N]
// prints "listening http://127.0.0.1:PORT" and serves until killed.

import { createServer } from 'node:http';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';

import { listenLocally } from './lib/selftest.mjs';

/**
 * Starts the server on 127.0.0.1. Resolves to { url, requests, close }.
 * `requests` records every request: { name, method, headers, body,
 * clientClosedEarly } (clientClosedEarly: the client went away before the
 * whole fixture was written, e.g. after an abort).
 */
export async function startFixtureServer(fixtures, { port = 0 } = {}) {
  const requests = [];

  const server = createServer(async (req, res) => {
    const name = decodeURIComponent(new URL(req.url, 'http://x').pathname.slice(1));
    const pieces = [];
    for await (const piece of req) pieces.push(piece);
    const record = {
      name,
      method: req.method,
      headers: req.headers,
      body: Buffer.concat(pieces).toString('utf8'),
      clientClosedEarly: false,
    };
    requests.push(record);

    const fixture = Object.hasOwn(fixtures, name) ? fixtures[name] : undefined;
    if (fixture === undefined) {
      res.writeHead(404, { 'content-type': 'text/plain' });
      res.end(`no fixture named ${JSON.stringify(name)}\n`);
      return;
    }

    let finished = false;
    res.on('close', () => {
      if (!finished) record.clientClosedEarly = true;
    });
    res.writeHead(fixture.status ?? 200, fixture.headers ?? {});
    res.flushHeaders();
    const body = Array.isArray(fixture.body) ? fixture.body : [fixture.body];
    for (const [index, piece] of body.entries()) {
      if (index > 0 && fixture.delayMs) await sleep(fixture.delayMs);
      if (res.destroyed) return;
      res.write(piece);
    }
    finished = true;
    res.end();
  });

  return { ...(await listenLocally(server, port)), requests };
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const [file, flag, value] = process.argv.slice(2);
  if (!file || (flag !== undefined && (flag !== '--port' || value === undefined))) {
    console.error('usage: node fixture-server.mjs FIXTURES.json [--port N]');
    process.exit(2);
  }
  const fixtures = JSON.parse(await readFile(file, 'utf8'));
  const { url } = await startFixtureServer(fixtures, { port: value ? Number(value) : 0 });
  console.log(`listening ${url}`);
}
