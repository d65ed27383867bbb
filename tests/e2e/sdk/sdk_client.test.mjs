// The official MCP TypeScript SDK client against the real server binary with the fake
// backend: what an MCP host such as Claude Desktop does, end to end over stdio.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const binary = process.env.SCS_BINARY;
const FINAL = new Set(['succeeded', 'failed', 'timed_out', 'out_of_memory', 'stopped',
  'sandbox_error']);

describe('safe-code-sandbox through the official MCP SDK client', () => {
  let client;
  let transport;
  let stderr = '';

  before(async () => {
    assert.ok(binary, 'SCS_BINARY must name the server binary');
    transport = new StdioClientTransport({
      command: binary,
      args: ['--backend', 'fake'],
      stderr: 'pipe',
    });
    transport.stderr.on('data', (chunk) => { stderr += chunk.toString(); });
    client = new Client({ name: 'scs-sdk-e2e', version: '1.0.0' });
    await client.connect(transport);
  });

  after(async () => {
    await client?.close();
  });

  async function call(name, args) {
    const result = await client.callTool({ name, arguments: args });
    assert.notEqual(result.isError, true, JSON.stringify(result.content));
    assert.deepEqual(JSON.parse(result.content[0].text), result.structuredContent);
    return result.structuredContent;
  }

  async function finalReport(runId) {
    const deadline = Date.now() + 60_000;
    while (Date.now() < deadline) {
      const report = await call('get_result', { run_id: runId, wait_seconds: 10 });
      if (FINAL.has(report.status)) {
        return report;
      }
    }
    assert.fail(`run ${runId} did not finish`);
  }

  test('a session keeps state between runs, returns the last expression, and closes', async () => {
    const session = await call('open_session', { limits: { memory_gb: 1 } });
    assert.equal(session.status, 'open');
    assert.match(session.session_id, /^[0-9a-f]{32}$/);
    const first = await call('start_run', {
      code: '#fake:set=rows=3\n', session_id: session.session_id, wait_seconds: 20 });
    assert.equal(first.status, 'succeeded');
    assert.equal(first.session_alive, true);
    assert.equal(first.limits, undefined);  // the session's, which open_session said
    assert.equal(first.result, undefined);
    const second = await call('start_run', {
      code: '#fake:get=rows\n', session_id: session.session_id, wait_seconds: 20 });
    assert.equal(second.status, 'succeeded');
    assert.equal(second.result, '3');
    assert.equal(second.session_id, session.session_id);
    const closed = await call('close_session', { session_id: session.session_id });
    assert.equal(closed.status, 'ended');
    const late = await client.callTool({ name: 'start_run', arguments: {
      code: 'x', session_id: session.session_id } });
    assert.equal(late.isError, true);
    assert.match(late.content[0].text, /has ended: it was closed by close_session/);
  });

  test('negotiates the protocol and names the server', () => {
    assert.equal(client.getServerVersion().name, 'safe-code-sandbox');
    assert.ok(client.getServerCapabilities().tools);
  });

  test('lists the five tools with input and output schemas', async () => {
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((t) => t.name).sort(), ['close_session', 'get_result', 'open_session', 'start_run', 'stop_run']);
    for (const tool of tools) {
      assert.equal(tool.inputSchema.type, 'object', tool.name);
      assert.equal(tool.outputSchema.type, 'object', tool.name);
      assert.ok(tool.description.length > 0, tool.name);
    }
    const start = tools.find((t) => t.name === 'start_run');
    assert.ok(start.inputSchema.required.includes('code'));
  });

  test('starts a run and reports its scripted output', async () => {
    const started = await call('start_run', {
      code: '#fake: stdout=hello\\sfrom\\sthe\\sfake\\n\nprint("never run")\n',
    });
    assert.match(started.status, /^(queued|running)$/);
    assert.equal(started.limits, undefined);  // the defaults
    const report = await finalReport(started.run_id);
    assert.equal(report.status, 'succeeded');
    assert.equal(report.exit_code, 0);
    assert.equal(report.stdout, 'hello from the fake\n');
    // The compact report: no count or flag of a whole stream, no empty stderr.
    assert.equal(report.stdout_bytes, undefined);
    assert.equal(report.stdout_truncated, undefined);
    assert.equal(report.stderr, undefined);
    const full = await call('get_result', { run_id: started.run_id, verbose: true });
    assert.equal(full.stdout_bytes, 20);
    assert.equal(full.stdout_truncated, false);
    assert.equal(full.limits.processes, 256);
  });

  test('each file of a report comes once, in its own block, and is listed', async () => {
    const result = await client.callTool({ name: 'start_run', arguments: {
      code: '#fake: outfile=plot.png:\\x89PNG\\r\\n\\x1a\\n\\x00\\x00\\x00\\rIHDR ' +
        'outfile=chart.svg:<svg/> outfile=table.csv:a,b\\n1,2\\n\n',
      wait_seconds: 20 } });
    assert.notEqual(result.isError, true, JSON.stringify(result.content));
    const report = result.structuredContent;
    assert.deepEqual(report.files.map((f) => f.path), ['plot.png', 'chart.svg', 'table.csv']);
    for (const file of report.files) {
      assert.match(file.sha256, /^[0-9a-f]{64}$/);
      assert.equal(file.content, undefined);
    }
    const types = result.content.map((block) => block.type);
    assert.deepEqual(types, ['text', 'image', 'resource', 'resource']);
    const png = result.content[1];
    assert.equal(png.mimeType, 'image/png');
    assert.equal(png._meta['io.scs/path'], 'plot.png');
    // The image's bytes are in its block only: not in the text a model reads.
    assert.equal(result.content[0].text.includes(png.data), false);
    assert.equal(result.content[0].text.includes('<svg'), false);
    assert.equal(result.content[2].resource.text, '<svg/>');
    assert.deepEqual(result.content[2].annotations, { audience: ['user'] });
    assert.equal(result.content[3].resource.text, 'a,b\n1,2\n');
    assert.match(result.content[3].resource.uri, /^scs:\/\/runs\/[0-9a-f]{32}\/out\/table\.csv$/);
  });

  test('stops a hanging run', async () => {
    const started = await call('start_run', { code: '#fake: hang\n' });
    const stopped = await call('stop_run', { run_id: started.run_id });
    assert.equal(stopped.status, 'stopped');
    const report = await call('get_result', { run_id: started.run_id });
    assert.equal(report.status, 'stopped');
  });

  test('refuses memory above the maximum with the exact message', async () => {
    const result = await client.callTool({
      name: 'start_run',
      arguments: { code: 'print(1)\n', limits: { memory_gb: 32 } },
    });
    assert.equal(result.isError, true);
    assert.match(result.content[0].text, /Requested 32 GB of memory, max is 16 GB/);
  });

  test('exits on its own within 2 s of stdin closing, with a run still hanging', async () => {
    await call('start_run', { code: '#fake: hang\n' });
    // close() ends stdin and sends SIGTERM only if the server is still running 2 s later.
    const begin = Date.now();
    await client.close();
    const took = Date.now() - begin;
    assert.ok(took < 2000, `the server took ${took} ms to exit`);
    // The server logged to stderr, never into the protocol stream.
    assert.match(stderr, /Information scs\.backend: fake: started/);
    assert.match(stderr, /stdin closed; stopping every run/);
    assert.match(stderr, /every run stopped; exiting/);
  });
});

describe('a message over the size cap, through the official MCP SDK client', () => {
  test('is answered to its id at once, although the SDK writes the id last', async () => {
    const transport = new StdioClientTransport({
      command: binary,
      args: ['--backend', 'fake', '--max-message-bytes', '65536', '--prepared', '0'],
      stderr: 'pipe',
    });
    const client = new Client({ name: 'scs-sdk-e2e', version: '1.0.0' });
    await client.connect(transport);
    try {
      const begin = Date.now();
      await assert.rejects(
        client.callTool({ name: 'start_run', arguments: { code: `# ${'x'.repeat(100_000)}\n` } },
          undefined, { timeout: 30_000 }),
        (error) => {
          assert.equal(error.code, -32600);
          assert.match(error.message, /longer than the limit of 65536 bytes/);
          return true;
        });
      const took = Date.now() - begin;
      assert.ok(took < 5000, `the answer took ${took} ms`);
      // The connection goes on.
      const { tools } = await client.listTools();
      assert.equal(tools.length, 5);
    } finally {
      await client.close();
    }
  });
});
