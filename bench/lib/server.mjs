// The server under test through the official MCP SDK client over stdio: started with the
// benchmark's flags, its per-step debug timings collected from its log, runs started and
// waited for; and the checks every trivial and analysis report must pass.
import fs from 'node:fs';
import path from 'node:path';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

import { cfg } from './config.mjs';
import { settle } from './settle.mjs';

const FINAL = new Set(['succeeded', 'failed', 'timed_out', 'out_of_memory', 'stopped',
  'sandbox_error']);

export class Server {
  // `prepared`: the --prepared flag to pass, or null to pass none (a --prepared in extraArgs
  // is then what counts, else 0: a binary from before prepared sandboxes).
  static async start(runtime, { logLevel = cfg.logLevel, extraArgs = [], binary = cfg.server,
    prepared = cfg.prepared } = {}) {
    const preparedArgs = prepared === null ? [] : ['--prepared', String(prepared)];
    const args = ['--image', cfg.image, '--runtime', runtime, '--seccomp-profile', cfg.seccomp,
      '--max-queue', String(Math.max(64, cfg.throughput + 8)), '--log-level', logLevel,
      ...preparedArgs, ...cfg.serverArgs, ...extraArgs];
    const transport = new StdioClientTransport({ command: binary, args, stderr: 'pipe' });
    const server = new Server(transport);
    transport.stderr.on('data', (chunk) => server.onLog(chunk.toString()));
    if (process.env.BENCH_SERVER_LOG) {  // a directory: each server's log, in start order
      transport.stderr.pipe(fs.createWriteStream(path.join(process.env.BENCH_SERVER_LOG,
        `server-${String(++Server.started).padStart(2, '0')}-${runtime}.log`)));
    }
    server.client = new Client({ name: 'scs-bench', version: '1.0.0' });
    await server.client.connect(transport);
    await server.client.listTools();  // the SDK validates structuredContent against these
    server.pid = transport.pid;
    const flag = args.lastIndexOf('--prepared');
    server.prepared = flag >= 0 ? Number(args[flag + 1]) : 0;
    await settle([server]);  // its prepared sandboxes are ready before it is measured
    return server;
  }

  static started = 0;

  constructor(transport) {
    this.transport = transport;
    this.partial = '';
    this.steps = {};
    this.errors = [];
  }

  // Collects the docker plugin's per-step debug timings and any warning or error line.
  onLog(text) {
    const lines = (this.partial + text).split('\n');
    this.partial = lines.pop();
    for (const line of lines) {
      if (/ (Warning|Error|Critical|Fatal) /.test(line) && this.errors.length < 20) {
        this.errors.push(line);
      }
      const add = (name, value) => (this.steps[name] ??= []).push(Number(value));
      let m;
      if ((m = line.match(/docker: create \S+ took ([\d.]+) ms/))) {
        add('create', m[1]);
      } else if ((m = line.match(/docker: inspect \S+ took ([\d.]+) ms/))) {
        add('inspect (posture)', m[1]);
      } else if ((m = line.match(/docker: start \S+: attach ([\d.]+) ms, wait ([\d.]+) ms, start ([\d.]+) ms/))) {
        add('attach', m[1]);
        add('register wait', m[2]);
        add('start', m[3]);
      } else if ((m = line.match(/: code delivered [^;]*; from (?:start|delivery): (.*)$/))) {
        // Each step from the later of start and delivery: when the code reached a started
        // sandbox, fresh or prepared.
        const at = Object.fromEntries([...m[1].matchAll(/([a-z ]+) ([\d.]+) ms/g)]
          .map(([, name, value]) => [name.trim(), Number(value)]));
        if (at['output ended'] !== undefined && at['wait body'] !== undefined &&
            at['die event'] !== undefined) {
          add('code in -> output ended', at['output ended']);
          add('output ended -> exit record', at['wait body'] - at['output ended']);
          add('exit record -> evidence complete', at['die event'] - at['wait body']);
        }
      } else if ((m = line.match(/docker: remove \S+ took ([\d.]+) ms/))) {
        add('remove', m[1]);
      }
    }
  }

  async call(name, args) {
    const result = await this.client.callTool({ name, arguments: args }, undefined,
      { timeout: 120_000 });
    if (result.isError) {
      throw new Error(`${name} failed: ${result.content?.[0]?.text}`);
    }
    return result.structuredContent;
  }

  // `extra`: more start_run arguments (a language).
  async start(code, extra = {}) {
    return this.call('start_run', { code, ...extra });
  }

  async final(report) {
    while (!FINAL.has(report.status)) {
      report = await this.call('get_result', { run_id: report.run_id, wait_seconds: 30 });
    }
    return report;
  }

  async run(code, extra = {}) {
    return this.final(await this.start(code, extra));
  }

  async close() {
    await this.client.close();
  }
}

export function expectTrivial(report) {
  if (report.status !== 'succeeded' || report.stdout !== '1\n') {
    throw new Error(`a trivial run did not succeed: ${report.status} ${report.reason} ` +
      `stdout=${JSON.stringify(report.stdout)} stderr=${JSON.stringify(report.stderr)}`);
  }
}

export function expectAnalysis(report) {
  if (report.status !== 'succeeded' || !report.stdout.endsWith('ok\n') ||
      !report.files?.some((file) => file.path === 'plot.png')) {
    throw new Error(`an analysis run did not succeed: ${report.status} ${report.reason} ` +
      `stderr=${JSON.stringify(report.stderr?.slice(-400))}`);
  }
}
