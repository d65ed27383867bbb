// Phase `tenants` of bench/bench.mjs: two tenants on one server over Streamable HTTP, one of
// them hostile, for as many runs as BENCH_TENANT_SOAK says. Where the server's memory goes and
// whether it plateaus once the report budgets are full.
//
//   mallory  every run prints 512 KiB and returns a 256 KiB file, two at a time; she keeps 12
//            long-polls waiting on a sleeping run and 40 connections that send a request head
//            and then nothing
//   alice    print(1), two at a time; her latency is measured
// Each does half of the runs.
//
// Every 100 finished runs the phase samples the server's VmRSS and the gauges of its /metrics:
// runs and sessions known, reports and report bytes retained.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const ALICE = 'alice-bench-0123456789abcdef0123456789';
const MALLORY = 'mallory-bench-0123456789abcdef01234567';
const FINAL = new Set(['succeeded', 'failed', 'timed_out', 'out_of_memory', 'stopped',
  'sandbox_error']);
const HOSTILE = [
  'import os, sys',
  'sys.stdout.write("x" * (512 * 1024))',
  'os.makedirs("out", exist_ok=True)',
  'open("out/blob.bin", "wb").write(os.urandom(256 * 1024))',
].join('\n');
const IDLE_CONNECTIONS = 40;
// With her two runs' own waits, within --max-waiting-per-tenant (16): the cap itself is
// tested in tests/e2e/http_e2e_test.cc.
const LONG_POLLS = 12;

function startServer(cfg, dir) {
  const tokens = path.join(dir, 'tokens');
  fs.writeFileSync(tokens, `alice:${ALICE}\nmallory:${MALLORY}\n`, { mode: 0o600 });
  const args = ['--http', '127.0.0.1:0', '--token-file', tokens, '--metrics', '127.0.0.1:0',
    '--image', cfg.image, '--runtime', 'runc', '--seccomp-profile', cfg.seccomp,
    '--log-level', 'info', '--prepared', String(cfg.prepared),
    // A small budget, so that it fills early in the soak and the plateau shows.
    '--max-retained-bytes-per-tenant', String(cfg.tenantBudget), ...cfg.serverArgs];
  const child = spawn(cfg.server, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  const ready = new Promise((resolve, reject) => {
    child.stderr.on('data', (chunk) => {
      log += chunk.toString();
      const mcp = log.match(/listening on (http:\/\/127\.0\.0\.1:\d+\/mcp)/);
      const metrics = log.match(/serving metrics at (http:\/\/127\.0\.0\.1:\d+\/metrics)/);
      if (mcp && metrics) {
        resolve({ mcp: mcp[1], metrics: metrics[1] });
      }
      if (log.length > 1 << 20) {
        log = log.slice(-65536);
      }
    });
    child.on('exit', (code) => reject(new Error(`server exited with ${code}:\n${log}`)));
  });
  return { child, ready, log: () => log };
}

async function connect(url, token) {
  const transport = new StreamableHTTPClientTransport(new URL(url),
    { requestInit: { headers: { Authorization: `Bearer ${token}` } } });
  const client = new Client({ name: 'scs-bench-tenants', version: '1.0.0' });
  await client.connect(transport);
  await client.listTools();
  return client;
}

async function call(client, name, args) {
  const result = await client.callTool({ name, arguments: args }, undefined, { timeout: 120_000 });
  return { error: result.isError ? result.content?.[0]?.text : null, report: result.structuredContent };
}

async function run(client, code) {
  let { error, report } = await call(client, 'start_run', { code });
  while (!error && !FINAL.has(report.status)) {
    ({ error, report } = await call(client, 'get_result', { run_id: report.run_id,
      wait_seconds: 30 }));
  }
  return error ? { status: `tool error: ${error}` } : report;
}

async function gauges(url) {
  const text = await (await fetch(url)).text();
  const value = (name) => Number(text.match(new RegExp(`^${name} (\\S+)$`, 'm'))?.[1]);
  return {
    runs_known: value('scs_runs_known'),
    reports_retained: value('scs_reports_retained'),
    report_bytes_retained: value('scs_report_bytes_retained'),
    sessions_known: value('scs_sessions_known'),
  };
}

// Connections that send a request head without its end and then nothing; each one the server
// closes is opened again, until `stop`.
function holdIdleConnections(url, count, stop) {
  const { hostname, port } = new URL(url);
  const open = () => {
    if (stop.done) {
      return;
    }
    const socket = net.connect(Number(port), hostname, () => {
      socket.write(`POST /mcp HTTP/1.1\r\nHost: ${hostname}\r\n`);
    });
    socket.on('error', () => {});
    socket.on('close', () => setTimeout(open, 100));
    stop.sockets.add(socket);
  };
  for (let i = 0; i < count; ++i) {
    open();
  }
}

export async function tenantSoak(cfg, { progress, procStatus, percentile }) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'scs-bench-tenants-'));
  const server = startServer(cfg, dir);
  const stop = { done: false, sockets: new Set() };
  const curve = [];
  const latencies = [];
  const statuses = { alice: {}, mallory: {} };
  const polls = { answered: 0, refused: 0 };
  const count = (who, status) => { statuses[who][status] = (statuses[who][status] ?? 0) + 1; };
  try {
    const urls = await server.ready;
    const alice = await connect(urls.mcp, ALICE);
    const mallory = await connect(urls.mcp, MALLORY);
    const pid = server.child.pid;
    const baseline = { done: 0, rss: procStatus(pid).rss, ...(await gauges(urls.metrics)) };
    curve.push(baseline);
    holdIdleConnections(urls.mcp, IDLE_CONNECTIONS, stop);
    // The long-polls: each waits on a run that sleeps, and is sent again when answered.
    const sleeping = await call(mallory, 'start_run', { code: 'import time\ntime.sleep(600)',
      limits: { timeout_seconds: 600 } });
    if (sleeping.error) {
      throw new Error(`mallory's sleeping run was refused: ${sleeping.error}`);
    }
    const sleeper = sleeping.report.run_id;
    const poller = async () => {
      while (!stop.done) {
        const { error } = await call(mallory, 'get_result', { run_id: sleeper, wait_seconds: 30 });
        polls[error ? 'refused' : 'answered'] += 1;
        if (error) {
          await new Promise((resolve) => setTimeout(resolve, 1000));
        }
      }
    };
    const pollers = Array.from({ length: LONG_POLLS }, poller);
    let done = 0;
    const next = { alice: 0, mallory: 0 };
    const sample = async () => {
      done += 1;
      if (done % 100 === 0 || done === cfg.tenantSoak) {
        const point = { done, rss: procStatus(pid).rss, ...(await gauges(urls.metrics)) };
        curve.push(point);
        progress(`tenants: ${done}/${cfg.tenantSoak}, VmRSS ${(point.rss / 2 ** 20).toFixed(1)} ` +
          `MiB, ${point.reports_retained} reports (${(point.report_bytes_retained / 2 ** 20)
            .toFixed(1)} MiB) retained`);
      }
    };
    const worker = (who, client, code) => async () => {
      while (next[who] < cfg.tenantSoak / 2) {
        next[who] += 1;
        const started = performance.now();
        const report = await run(client, code);
        if (who === 'alice') {
          latencies.push(performance.now() - started);
        }
        count(who, report.status);
        await sample();
      }
    };
    const started = performance.now();
    await Promise.all([worker('alice', alice, 'print(1)')(), worker('alice', alice, 'print(1)')(),
      worker('mallory', mallory, HOSTILE)(), worker('mallory', mallory, HOSTILE)()]);
    const seconds = (performance.now() - started) / 1000;
    stop.done = true;
    for (const socket of stop.sockets) {
      socket.destroy();
    }
    await call(mallory, 'stop_run', { run_id: sleeper });
    await Promise.all(pollers);
    const half = curve.find((point) => point.done >= cfg.tenantSoak / 2) ?? curve.at(-1);
    const end = curve.at(-1);
    return {
      runs: cfg.tenantSoak,
      seconds,
      budget_per_tenant: cfg.tenantBudget,
      idle_connections: IDLE_CONNECTIONS,
      long_polls: LONG_POLLS,
      polls,
      statuses,
      alice_p50: percentile(latencies, 50),
      alice_p95: percentile(latencies, 95),
      baseline_rss: baseline.rss,
      half_rss: half.rss,
      end_rss: end.rss,
      end_hwm: procStatus(pid).hwm,
      curve,
    };
  } finally {
    stop.done = true;
    for (const socket of stop.sockets) {
      socket.destroy();
    }
    server.child.kill('SIGTERM');
    await new Promise((resolve) => (server.child.exitCode !== null ? resolve()
      : server.child.on('exit', resolve)));
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
