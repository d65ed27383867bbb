// Issue 27: the official SDK v2 client (@modelcontextprotocol/client 2.4.0) against the real
// server with the fake backend, over stdio and Streamable HTTP, pinned to revision 2026-07-28
// and in auto mode (a server/discover probe, then stateless requests), and in its default
// legacy mode (initialize): a run, a session and a stop in each.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';

const binary = process.env.SCS_BINARY;
const ALICE = 'alice-v2-0123456789abcdef0123456789';
const BOB = 'bob-v2-0123456789abcdef0123456789ab';
const MODES = {
  pinned: { mode: { pin: '2026-07-28' } },
  auto: { mode: 'auto', probe: { timeoutMs: 10_000 } },
  legacy: { mode: 'legacy' },
};
const EXPECTED_VERSION = { pinned: '2026-07-28', auto: '2026-07-28', legacy: '2025-11-25' };

function newClient(mode) {
  return new Client({ name: `scs-v2-${mode}`, version: '1.0.0' },
    { versionNegotiation: MODES[mode] });
}

async function connectStdio(mode) {
  const client = newClient(mode);
  await client.connect(new StdioClientTransport({
    command: binary, args: ['--backend', 'fake'], stderr: 'ignore' }));
  return client;
}

async function connectHttp(mode, url, token) {
  const client = newClient(mode);
  await client.connect(new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  return client;
}

function structured(result) {
  assert.notEqual(result.isError, true, JSON.stringify(result.content));
  return result.structuredContent;
}

// What every client must be able to do whatever the revision: list the tools, run, keep state
// in a session, and stop a run.
async function runSessionAndStop(client, mode) {
  assert.equal(client.getNegotiatedProtocolVersion(), EXPECTED_VERSION[mode]);
  assert.equal(client.getServerVersion().name, 'safe-code-sandbox');
  const { tools } = await client.listTools();
  assert.deepEqual(tools.map((tool) => tool.name).sort(),
    ['close_session', 'get_result', 'open_session', 'start_run', 'stop_run']);

  const ran = structured(await client.callTool({ name: 'start_run', arguments: {
    code: '#fake: stdout=hi\\n\n', wait_seconds: 20 } }));
  assert.equal(ran.status, 'succeeded');
  assert.equal(ran.stdout, 'hi\n');

  const session = structured(await client.callTool({ name: 'open_session', arguments: {} }));
  const inSession = structured(await client.callTool({ name: 'start_run', arguments: {
    code: '#fake:result=7\n', session_id: session.session_id, wait_seconds: 20 } }));
  assert.equal(inSession.result, '7');
  assert.equal(structured(await client.callTool({ name: 'close_session', arguments: {
    session_id: session.session_id } })).status, 'ended');

  const started = structured(await client.callTool({ name: 'start_run', arguments: {
    code: '#fake: sleep_ms=30000\n' } }));
  assert.notEqual(started.status, 'succeeded');
  const stopped = structured(await client.callTool({ name: 'stop_run', arguments: {
    run_id: started.run_id } }));
  assert.equal(stopped.status, 'stopped');
  return ran.run_id;
}

describe('the SDK v2 client over stdio', () => {
  for (const mode of Object.keys(MODES)) {
    test(`${mode}: a run, a session and a stop`, async () => {
      assert.ok(binary, 'SCS_BINARY must name the server binary');
      const client = await connectStdio(mode);
      try {
        await runSessionAndStop(client, mode);
      } finally {
        await client.close();
      }
    });
  }
});

describe('the SDK v2 client over Streamable HTTP', () => {
  let dir;
  let server;
  let url;
  let log = '';

  before(async () => {
    assert.ok(binary, 'SCS_BINARY must name the server binary');
    dir = mkdtempSync(join(tmpdir(), 'scs-sdk-v2-'));
    const tokens = join(dir, 'tokens');
    writeFileSync(tokens, `alice:${ALICE}\nbob:${BOB}\n`);
    chmodSync(tokens, 0o600);
    server = spawn(binary, ['--backend', 'fake', '--http', '127.0.0.1:0', '--token-file', tokens],
      { stdio: ['ignore', 'ignore', 'pipe'] });
    url = await new Promise((resolve, reject) => {
      server.stderr.on('data', (chunk) => {
        log += chunk.toString();
        const match = log.match(/listening on (http:\/\/127\.0\.0\.1:\d+\/mcp)/);
        if (match) {
          resolve(match[1]);
        }
      });
      server.on('exit', (code) => reject(new Error(`server exited with ${code}:\n${log}`)));
    });
  });

  after(async () => {
    if (server && server.exitCode === null) {
      const exited = new Promise((resolve) => server.on('exit', resolve));
      server.kill('SIGTERM');
      assert.equal(await exited, 0, log);
    }
    if (dir) {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  for (const mode of Object.keys(MODES)) {
    test(`${mode}: a run, a session and a stop, none of them another tenant's`, async () => {
      const alice = await connectHttp(mode, url, ALICE);
      const bob = await connectHttp(mode, url, BOB);
      try {
        const runId = await runSessionAndStop(alice, mode);
        const stranger = await bob.callTool({ name: 'get_result', arguments: { run_id: runId } });
        assert.equal(stranger.isError, true);
        assert.match(stranger.content[0].text, /Unknown or expired run_id/);
      } finally {
        await alice.close();
        await bob.close();
      }
    });
  }

  test('pinned: a long wait streams progress on the request\'s own stream', async () => {
    const client = await connectHttp('pinned', url, ALICE);
    try {
      const started = structured(await client.callTool({ name: 'start_run', arguments: {
        code: '#fake: sleep_ms=6000 stdout=done\\n\n' } }));
      const progress = [];
      const report = structured(await client.callTool(
        { name: 'get_result', arguments: { run_id: started.run_id, wait_seconds: 30 } },
        { onprogress: (p) => progress.push(p), resetTimeoutOnProgress: true, timeout: 60_000 }));
      assert.equal(report.status, 'succeeded');
      assert.equal(report.stdout, 'done\n');
      assert.ok(progress.length >= 1, 'no progress notification arrived');
      assert.match(progress[0].message, /still running/);
    } finally {
      await client.close();
    }
  });
});
