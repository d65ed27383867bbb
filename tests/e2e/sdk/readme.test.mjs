// The README's words against the server: every client snippet it gives (Claude Desktop and
// Cursor's mcpServers, VS Code's servers, Claude Code's `claude mcp add ... --`) starts a server
// that the official SDK client can talk to, with the arguments the snippet passes (the fake
// backend added); and the README's Tools table names exactly the tools and arguments the server
// lists.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, test } from 'node:test';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const binary = process.env.SCS_BINARY;
const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const readme = readFileSync(join(root, 'README.md'), 'utf8');

// The stdio snippets: [where, command, args].
function snippets() {
  const found = [];
  for (const [, body] of readme.matchAll(/```json\n([\s\S]*?)```/g)) {
    const config = JSON.parse(body);
    for (const [key, kind] of [['mcpServers', 'mcpServers'], ['servers', 'VS Code servers']]) {
      for (const [name, server] of Object.entries(config[key] ?? {})) {
        if (server.command) {
          if (key === 'servers') {
            assert.equal(server.type, 'stdio', `${kind} ${name} needs "type": "stdio"`);
          }
          found.push([`${kind} ${name}`, server.command, server.args ?? []]);
        }
      }
    }
  }
  for (const [, line] of readme.matchAll(/^claude mcp add (?!--transport)(.*)$/gm)) {
    const words = line.trim().split(/\s+/);
    const dash = words.indexOf('--');
    assert.ok(dash > 0, `claude mcp add needs -- before the command: ${line}`);
    found.push(['claude mcp add', words[dash + 1], words.slice(dash + 2)]);
  }
  return found;
}

// The Tools table: tool name -> its argument names, from `name(a, b?, ...)`.
function documentedTools() {
  const section = readme.slice(readme.indexOf('## Tools'), readme.indexOf('### Sessions'));
  const tools = new Map();
  for (const [, name, args] of section.matchAll(/^\| `([a-z_]+)\(([^)]*)\)` \|/gm)) {
    tools.set(name, args.split(',').map((a) => a.trim().replace(/\?$/, '')).filter(Boolean).sort());
  }
  return tools;
}

describe('the README against the server it documents', () => {
  const found = snippets();

  test('gives stdio snippets for Claude Desktop or Cursor, VS Code and Claude Code', () => {
    const kinds = found.map(([where]) => where);
    assert.ok(kinds.some((k) => k.startsWith('mcpServers')), kinds.join(', '));
    assert.ok(kinds.some((k) => k.startsWith('VS Code')), kinds.join(', '));
    assert.ok(kinds.includes('claude mcp add'), kinds.join(', '));
  });

  for (const [where, command, args] of found) {
    test(`${where}: ${command} ${args.join(' ')} serves the tools the README lists`, async () => {
      // The documented command is scripts/run or the built binary; both end in this binary,
      // which runs here with the snippet's own arguments.
      assert.match(command, /\/(scripts\/run|build\/safe-code-sandbox)$/);
      const transport = new StdioClientTransport({ command: binary,
        args: [...args, '--backend', 'fake'], stderr: 'pipe' });
      const client = new Client({ name: 'scs-readme-e2e', version: '1.0.0' });
      await client.connect(transport);
      try {
        const { tools } = await client.listTools();
        const documented = documentedTools();
        assert.deepEqual([...documented.keys()].sort(), tools.map((t) => t.name).sort());
        for (const tool of tools) {
          assert.deepEqual(documented.get(tool.name), Object.keys(tool.inputSchema.properties).sort(),
            `the README's arguments of ${tool.name}`);
        }
      } finally {
        await client.close();
      }
    });
  }
});
