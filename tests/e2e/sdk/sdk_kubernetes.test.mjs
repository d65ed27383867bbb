// The official MCP TypeScript SDK client against the real server binary with the kubernetes
// backend, over the API server double run as a program (tests/support/kube_api_double_main.cc):
// the same tools from Pods, a session's state kept in one Pod included.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, existsSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const binary = process.env.SCS_BINARY;
const doubleBinary = process.env.SCS_KUBE_DOUBLE;
const profile = process.env.SCS_SECCOMP_PROFILE;

describe('safe-code-sandbox on the kubernetes backend through the official MCP SDK client', () => {
  let api;
  let client;
  let dir;
  let stderr = '';

  before(async () => {
    assert.ok(binary && doubleBinary && profile,
      'SCS_BINARY, SCS_KUBE_DOUBLE and SCS_SECCOMP_PROFILE must be set');
    dir = mkdtempSync(join(tmpdir(), 'scs-kube-'));
    const kubeconfig = join(dir, 'kubeconfig');
    api = spawn(doubleBinary, [kubeconfig], { stdio: ['ignore', 'ignore', 'inherit'] });
    const deadline = Date.now() + 10_000;
    while (!existsSync(kubeconfig)) {
      assert.ok(Date.now() < deadline, 'the API server double did not start');
      await new Promise((resolve) => setTimeout(resolve, 20));
    }  // renamed into place whole
    const transport = new StdioClientTransport({
      command: binary,
      args: ['--backend', 'kubernetes', '--seccomp-profile', profile,
        '--backend-option', `kube-config=${kubeconfig}`,
        '--backend-option', 'seccomp-localhost=profiles/scs.json',
        '--backend-option', `seccomp-localhost-file=${profile}`],
      stderr: 'pipe',
    });
    transport.stderr.on('data', (chunk) => { stderr += chunk.toString(); });
    client = new Client({ name: 'scs-sdk-kubernetes-e2e', version: '1.0.0' });
    await client.connect(transport);
  });

  after(async () => {
    await client?.close();
    api?.kill('SIGTERM');
    if (dir) {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  async function call(name, args) {
    const result = await client.callTool({ name, arguments: args });
    assert.notEqual(result.isError, true, JSON.stringify(result.content) + stderr);
    return result.structuredContent;
  }

  test('lists the same five tools', async () => {
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((t) => t.name).sort(),
      ['close_session', 'get_result', 'open_session', 'start_run', 'stop_run']);
  });

  test('a run in its own Pod reports its output and exit', async () => {
    const report = await call('start_run', {
      code: '#fake: stdout=hello\\sfrom\\sa\\spod\\n\n#fake: exit=4\n', wait_seconds: 30 });
    assert.equal(report.status, 'failed', stderr);
    assert.equal(report.exit_code, 4);
    assert.equal(report.stdout, 'hello from a pod\n');
  });

  test('a session keeps state between runs in one Pod, and closes', async () => {
    const session = await call('open_session', { limits: { memory_gb: 1 } });
    assert.equal(session.status, 'open');
    const first = await call('start_run', {
      code: '#fake:set=rows=3\n', session_id: session.session_id, wait_seconds: 30 });
    assert.equal(first.status, 'succeeded', stderr);
    const second = await call('start_run', {
      code: '#fake:get=rows\n', session_id: session.session_id, wait_seconds: 30 });
    assert.equal(second.status, 'succeeded');
    assert.equal(second.result, '3');
    const closed = await call('close_session', { session_id: session.session_id });
    assert.equal(closed.status, 'ended');
  });
});
