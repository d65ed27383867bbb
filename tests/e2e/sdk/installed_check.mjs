// The official MCP SDK's Streamable HTTP client against an installed server (tests/install):
// lists the tools and, given code, runs it and prints its report's status.
// Usage: node installed_check.mjs URL TOKEN [CODE [PACKAGES]]; PACKAGES a comma list for
// start_run's `packages`; exit status 1 when a check fails.
import assert from 'node:assert/strict';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const [url, token, code, packages] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const client = new Client({ name: 'scs-install-test', version: '1.0.0' });
try {
  await client.connect(transport);
  const { tools } = await client.listTools();
  const names = tools.map((tool) => tool.name).sort();
  assert.deepEqual(names, ['close_session', 'get_result', 'open_session', 'start_run', 'stop_run']);
  console.log(`tools/list: ${names.join(', ')}`);
  if (code !== undefined) {
    const started = await client.callTool(
      { name: 'start_run', arguments: { code, ...(packages ? { packages: packages.split(',') } : {}) } },
      undefined,
      { timeout: 120000 },
    );
    assert.equal(started.isError, false, JSON.stringify(started));
    const { run_id } = started.structuredContent;
    const result = await client.callTool(
      { name: 'get_result', arguments: { run_id, wait_seconds: 60 } },
      undefined,
      { timeout: 90000 },
    );
    assert.equal(result.isError, false, JSON.stringify(result));
    console.log(`run: ${result.structuredContent.status} ${JSON.stringify(result.structuredContent.stdout)}`);
  }
  await client.close();
} catch (error) {
  console.error(`installed_check: ${error.stack || error}`);
  process.exit(1);
}
