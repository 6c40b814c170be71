// What the self-tests of tests/js (selftest.mjs, chat-driver-selftest.mjs)
// share: a local HTTP server that closes at once, and running a script of
// this folder as a child process.

import { spawn } from 'node:child_process';

/**
 * Starts `server` (a node:http server) on 127.0.0.1:`port` (0: any free
 * port). Resolves to `{ url, close }`; `close()` ends open connections, so
 * streams still being written do not hold it up.
 */
export async function listenLocally(server, port = 0) {
  const sockets = new Set();
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', resolve);
  });
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    close: () =>
      new Promise((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

/** Runs the node script `path` with `args`; resolves to `{ code, stdout, stderr }`. */
export function runScript(path, args) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [path, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (piece) => (stdout += piece));
    child.stderr.on('data', (piece) => (stderr += piece));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}
