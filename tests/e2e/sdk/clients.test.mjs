// What real clients hand a model from a report with files (issue 24): the MCP Inspector's CLI
// (v1, its --cli mode over stdio) and a Claude Code style client, which passes each content
// block on as its type says (text as text, an image as an image, an embedded text resource as
// its text) and ignores structuredContent. Each sees every file listed once and each image's
// bytes once, in its image block, never in text.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { after, before, describe, test } from 'node:test';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const binary = process.env.SCS_BINARY;
const here = dirname(fileURLToPath(import.meta.url));
const inspector = join(here, 'node_modules', '.bin', 'mcp-inspector');

// A PNG's signature and a little more, an SVG and a CSV, all under /workspace/out.
const CODE = '#fake: outfile=plot.png:\\x89PNG\\r\\n\\x1a\\n\\x00\\x00\\x00\\rIHDRdata ' +
  'outfile=chart.svg:<svg/> outfile=table.csv:a,b\\n1,2\\n stdout=done\\n\n';
const PNG_BASE64 = Buffer.from('\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDRdata', 'latin1').toString('base64');

// What a Claude Code style client hands the model: texts and images, in block order.
function handedToModel(result) {
  const texts = [];
  const images = [];
  for (const block of result.content) {
    if (block.type === 'text') {
      texts.push(block.text);
    } else if (block.type === 'image') {
      images.push(block.data);
    } else if (block.type === 'resource' && typeof block.resource.text === 'string') {
      const forUser = block.annotations?.audience?.length === 1 &&
        block.annotations.audience[0] === 'user';
      if (!forUser) {
        texts.push(block.resource.text);
      }
    }
  }
  return { texts, images };
}

function expectEachFileOnce(result) {
  assert.notEqual(result.isError, true, JSON.stringify(result.content));
  const listed = JSON.parse(result.content[0].text).files.map((file) => file.path);
  assert.deepEqual(listed, ['plot.png', 'chart.svg', 'table.csv']);
  const blocks = result.content.slice(1).map((block) => block._meta['io.scs/path']);
  assert.deepEqual(blocks, listed, 'one content block per file, in file order');
  const { texts, images } = handedToModel(result);
  assert.deepEqual(images, [PNG_BASE64]);
  for (const text of texts) {
    assert.equal(text.includes(PNG_BASE64), false, 'the image is in a text block too');
    assert.equal(text.includes('<svg'), false, 'the SVG, marked for the user, reached the model');
  }
  assert.ok(texts.includes('a,b\n1,2\n'), 'the CSV reaches the model once, as its text');
  assert.ok(texts.join('').length <= 1000, `${texts.join('').length} characters of text`);
}

describe('what clients hand a model from a report with files', () => {
  let client;

  before(async () => {
    assert.ok(binary, 'SCS_BINARY must name the server binary');
    client = new Client({ name: 'claude-code-style', version: '1.0.0' });
    await client.connect(new StdioClientTransport({ command: binary, args: ['--backend', 'fake'],
      stderr: 'ignore' }));
  });

  after(async () => {
    await client?.close();
  });

  test('a Claude Code style client over the official SDK', async () => {
    expectEachFileOnce(await client.callTool({ name: 'start_run',
      arguments: { code: CODE, wait_seconds: 20 } }));
  });

  test('the MCP Inspector CLI', async () => {
    const { stdout } = await promisify(execFile)(inspector, ['--cli', binary, '--backend', 'fake',
      '--method', 'tools/call', '--tool-name', 'start_run', '--tool-arg', `code=${CODE}`,
      '--tool-arg', 'wait_seconds=20'], { timeout: 60_000, maxBuffer: 1 << 24 });
    expectEachFileOnce(JSON.parse(stdout.slice(stdout.indexOf('{'))));
  });
});
