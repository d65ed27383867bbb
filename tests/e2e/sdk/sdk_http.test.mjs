// The official MCP TypeScript SDK's Streamable HTTP client against the real server binary
// (--http 127.0.0.1:0, the port read from its log) with the fake backend and two tenants.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const binary = process.env.SCS_BINARY;
const ALICE = 'alice-sdk-0123456789abcdef0123456789';
const BOB = 'bob-sdk-0123456789abcdef0123456789ab';

function startServer(args) {
  const child = spawn(binary, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  const url = new Promise((resolve, reject) => {
    child.stderr.on('data', (chunk) => {
      log += chunk.toString();
      const match = log.match(/listening on (http:\/\/127\.0\.0\.1:\d+\/mcp)/);
      if (match) {
        resolve(match[1]);
      }
    });
    child.on('exit', (code) => reject(new Error(`server exited with ${code}:\n${log}`)));
  });
  return { child, url, log: () => log };
}

function exited(child) {
  return new Promise((resolve) => {
    if (child.exitCode !== null) {
      resolve(child.exitCode);
    } else {
      child.on('exit', (code) => resolve(code));
    }
  });
}

async function connect(url, token) {
  const headers = token ? { Authorization: `Bearer ${token}` } : {};
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
  const client = new Client({ name: 'scs-sdk-http-e2e', version: '1.0.0' });
  await client.connect(transport);
  return { client, transport };
}

describe('safe-code-sandbox over Streamable HTTP through the official MCP SDK client', () => {
  let dir;
  let server;
  let url;

  before(async () => {
    assert.ok(binary, 'SCS_BINARY must name the server binary');
    dir = mkdtempSync(join(tmpdir(), 'scs-sdk-http-'));
    const tokens = join(dir, 'tokens');
    writeFileSync(tokens, `# two tenants\nalice:${ALICE}\nbob:${BOB}\n`);
    chmodSync(tokens, 0o600);
    server = startServer(['--backend', 'fake', '--http', '127.0.0.1:0', '--token-file', tokens,
      '--session-idle-seconds', '2']);
    url = await server.url;
  });

  after(async () => {
    if (server) {
      server.child.kill('SIGTERM');
      assert.equal(await exited(server.child), 0, server.log());
      assert.ok(!server.log().includes(ALICE) && !server.log().includes(BOB), 'a token was logged');
    }
    if (dir) {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('a session belongs to its tenant and expires when idle', async () => {
    const alice = await connect(url, ALICE);
    const bob = await connect(url, BOB);
    const opened = await alice.client.callTool({ name: 'open_session', arguments: {} });
    assert.notEqual(opened.isError, true, JSON.stringify(opened.content));
    const id = opened.structuredContent.session_id;
    const ran = await alice.client.callTool({ name: 'start_run', arguments: {
      code: '#fake:result=7\n', session_id: id, wait_seconds: 20 } });
    assert.equal(ran.structuredContent.result, '7', JSON.stringify(ran));
    for (const [name, args] of [['start_run', { code: 'x', session_id: id }],
      ['close_session', { session_id: id }]]) {
      const stranger = await bob.client.callTool({ name, arguments: args });
      assert.equal(stranger.isError, true, name);
      assert.match(stranger.content[0].text, /Unknown session_id/);
    }
    await new Promise((resolve) => setTimeout(resolve, 3500));
    const expired = await alice.client.callTool({ name: 'start_run', arguments: {
      code: 'x', session_id: id } });
    assert.equal(expired.isError, true);
    assert.match(expired.content[0].text, /has ended: it was idle for 2 s/);
    await alice.client.close();
    await bob.client.close();
  });

  test('a client without a token, or with a wrong one, is refused with 401', async () => {
    await assert.rejects(connect(url), (error) => error.code === 401);
    await assert.rejects(connect(url, 'not-the-right-token-0123456789'),
      (error) => error.code === 401);
  });

  test('runs code, streams progress while waiting, and hides the run from another tenant',
    async () => {
      const alice = await connect(url, ALICE);
      assert.equal(alice.client.getServerVersion().name, 'safe-code-sandbox');
      assert.match(alice.transport.sessionId, /^[0-9a-f]{32}$/);
      await alice.client.ping();
      const { tools } = await alice.client.listTools();
      assert.deepEqual(tools.map((t) => t.name).sort(), ['close_session', 'get_result', 'open_session', 'start_run', 'stop_run']);

      const started = await alice.client.callTool({
        name: 'start_run',
        arguments: { code: '#fake: sleep_ms=6000 stdout=done\\n\nprint("never run")\n' },
      });
      assert.notEqual(started.isError, true, JSON.stringify(started.content));
      const runId = started.structuredContent.run_id;

      // The wait outlasts the server's 5 s progress interval: the answer comes as an SSE
      // stream with notifications/progress first.
      const progress = [];
      const report = await alice.client.callTool(
        { name: 'get_result', arguments: { run_id: runId, wait_seconds: 30 } },
        undefined,
        { onprogress: (p) => progress.push(p), resetTimeoutOnProgress: true, timeout: 60_000 });
      assert.equal(report.structuredContent.status, 'succeeded', JSON.stringify(report));
      assert.equal(report.structuredContent.stdout, 'done\n');
      assert.ok(progress.length >= 1, 'no progress notification arrived');
      assert.equal(progress[0].total, 30);
      assert.match(progress[0].message, /still running/);

      const bob = await connect(url, BOB);
      for (const name of ['get_result', 'stop_run']) {
        const stranger = await bob.client.callTool({ name, arguments: { run_id: runId } });
        assert.equal(stranger.isError, true, name);
        assert.match(stranger.content[0].text, /Unknown or expired run_id/);
      }
      const again = await alice.client.callTool({
        name: 'get_result', arguments: { run_id: runId } });
      assert.equal(again.structuredContent.status, 'succeeded');

      // DELETE ends the session; the server then answers 404 for it.
      await bob.transport.terminateSession();
      await bob.client.close();
      const ended = alice.transport.sessionId;
      await alice.transport.terminateSession();
      await alice.client.close();
      const stale = await fetch(url, {
        method: 'POST',
        headers: {
          Authorization: `Bearer ${ALICE}`,
          'Content-Type': 'application/json',
          Accept: 'application/json, text/event-stream',
          'Mcp-Session-Id': ended,
        },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
      });
      assert.equal(stale.status, 404);
    });
});
