// The benchmark behind `bench/run` (see docs/BENCHMARKS.md). Progress goes to stderr; the
// final table goes to stdout and to bench/results/<date>.md, every sample to <date>.json.
//
// Contenders for one trivial run (`print(1)`), measured interleaved in one process so that
// load drifts hit all of them alike:
//   mcp       the server over stdio with the official MCP SDK client: start_run, then
//             get_result with wait_seconds until the report is final; the run takes the
//             server's prepared sandbox (--prepared, BENCH_PREPARED)
//   fresh     the same server binary with --prepared 0: every run creates its sandbox
//   docker    `docker run --rm` with the server's controls as flags, `python3 -I -c`
//   floor     the Engine API alone: create, wait (registered), start, wait body, remove
//   prepared  the Engine API with a sandbox created and started ahead of need (the launcher
//             idles on stdin): write the code, read the output to its end and the exit
//             record. Informational: the floor for any server that keeps prepared sandboxes.
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

import { arrivals } from './arrivals.mjs';
import { tenantSoak } from './tenants.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..');

function envInt(name, fallback) {
  const text = process.env[name];
  if (text === undefined || text === '') {
    return fallback;
  }
  const value = Number(text);
  if (!Number.isInteger(value) || value < 0) {
    throw new Error(`${name} must be a whole number, not '${text}'`);
  }
  return value;
}

const quick = process.env.BENCH_QUICK === '1';
const cfg = {
  runs: envInt('BENCH_RUNS', quick ? 10 : 50),
  warmup: envInt('BENCH_WARMUP', quick ? 2 : 5),
  throughput: envInt('BENCH_THROUGHPUT', quick ? 20 : 200),
  concurrency: envInt('BENCH_CONCURRENCY', 4),
  soak: envInt('BENCH_SOAK', quick ? 100 : 1000),
  // The two-tenant soak (bench/tenants.mjs): its runs, and mallory's retained-bytes budget.
  tenantSoak: envInt('BENCH_TENANT_SOAK', quick ? 200 : 1200),
  tenantBudget: envInt('BENCH_TENANT_BUDGET', 32 * 1024 ** 2),
  // The arrival phases (bench/arrivals.mjs): runs per pattern and round, rounds, the length of a
  // Poisson round, and which programs.
  arrivalRuns: envInt('BENCH_ARRIVAL_RUNS', quick ? 8 : 12),
  arrivalRounds: envInt('BENCH_ARRIVAL_ROUNDS', 2),
  poissonSeconds: envInt('BENCH_POISSON_SECONDS', quick ? 10 : 30),
  arrivalCodes: (process.env.BENCH_ARRIVAL_CODES ?? 'trivial,analysis').split(','),
  arrivalParts: (name) => !process.env.BENCH_ARRIVAL_PATTERNS ||
    process.env.BENCH_ARRIVAL_PATTERNS.split(',').includes(name),
  floodMiB: envInt('BENCH_FLOOD_MB', 100),
  runsc: process.env.BENCH_RUNSC ?? 'auto',  // auto | 0 | 1
  phases: (process.env.BENCH_PHASES ??
    'arrivals,latency,analysis,burst,session,runsc,throughput,memory,soak,tenants')
    .split(','),
  analysisRuns: envInt('BENCH_ANALYSIS_RUNS', quick ? 5 : 20),
  burstRounds: envInt('BENCH_BURST_ROUNDS', quick ? 3 : 10),
  // The pause between two bursts: an agent's turn between two fan-outs.
  burstPauseMs: envInt('BENCH_BURST_PAUSE_MS', 2000),
  server: process.env.BENCH_SERVER ?? path.join(root, 'build-bench', 'safe-code-sandbox'),
  // A second server binary measured as one more contender (e.g. a prototype), or empty.
  compare: process.env.BENCH_COMPARE ?? '',
  compareArgs: (process.env.BENCH_COMPARE_ARGS ?? '').split(' ').filter(Boolean),
  // Prepared sandboxes each server under test keeps (its --prepared).
  prepared: envInt('BENCH_PREPARED', 1),
  // Extra flags for every server the benchmark starts (e.g. --retention-seconds 1).
  serverArgs: (process.env.BENCH_SERVER_ARGS ?? '').split(' ').filter(Boolean),
  image: process.env.BENCH_IMAGE ?? 'safe-code-sandbox:latest',
  seccomp: process.env.BENCH_SECCOMP ?? path.join(root, 'docker', 'seccomp.json'),
  socket: process.env.BENCH_DOCKER_SOCKET ?? '/var/run/docker.sock',
  logLevel: process.env.BENCH_LOG_LEVEL ?? 'debug',
  resultsDir: process.env.BENCH_RESULTS ?? path.join(here, 'results'),
  label: process.env.BENCH_LABEL ?? '',
};

const FINAL = new Set(['succeeded', 'failed', 'timed_out', 'out_of_memory', 'stopped',
  'sandbox_error']);
const TRIVIAL = 'print(1)';
// What agents run: the scientific stack imported, a small DataFrame described and plotted to
// a PNG under out/ (which the server returns as an image; docker run just writes it).
const ANALYSIS = [
  'import os',
  'import numpy as np',
  'import pandas as pd',
  'import matplotlib.pyplot as plt',
  'rng = np.random.default_rng(1)',
  'df = pd.DataFrame({"x": np.arange(1000), "y": rng.normal(size=1000).cumsum()})',
  'print(df.describe())',
  'df.plot(x="x", y="y")',
  'os.makedirs("out", exist_ok=True)',
  'plt.savefig("out/plot.png")',
  'print("ok")',
].join('\n');
const BENCH_LABEL = 'io.scs.bench';

// What the server's sandbox gets by default (5 GB, 2 cpus, 256 processes, 600 s): the same
// controls, spelled as `docker run` flags and as an Engine API create body.
const sandbox = {
  user: '10001:10001',
  env: ['PATH=/usr/local/bin:/usr/bin:/bin', 'HOME=/tmp', 'LANG=C.UTF-8',
    'PYTHONDONTWRITEBYTECODE=1', 'PYTHONUNBUFFERED=1', 'MPLBACKEND=Agg', 'OMP_NUM_THREADS=2',
    'OPENBLAS_NUM_THREADS=2'],
  tmpfs: {
    '/tmp': 'rw,noexec,nosuid,nodev,size=134217728,nr_inodes=4096,mode=1777',
    '/workspace': 'rw,noexec,nosuid,nodev,size=536870912,nr_inodes=16384,mode=0700,uid=10001,' +
      'gid=10001',
  },
  memory: 5 * 1024 ** 3,
  nanoCpus: 2e9,
  pids: 256,
  ulimits: [{ Name: 'nofile', Soft: 1024, Hard: 1024 },
    { Name: 'fsize', Soft: 268435456, Hard: 268435456 }, { Name: 'core', Soft: 0, Hard: 0 }],
  shm: 64 * 1024 ** 2,
  oomScoreAdj: 500,
};

// ---------------------------------------------------------------------------------------------
// Small helpers

const t0 = Date.now();
function progress(message) {
  const seconds = ((Date.now() - t0) / 1000).toFixed(0).padStart(4);
  const load = os.loadavg()[0].toFixed(2);
  process.stderr.write(`[bench ${seconds}s load ${load}] ${message}\n`);
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// The order the contenders run in, in round `round`: a shuffle seeded by the round, the same in
// every run of the benchmark. A rotation would keep each contender's predecessor fixed, and so
// whatever one contender leaves behind (a container being torn down, an interpreter starting)
// would always fall on the same next one.
function roundOrder(names, round) {
  let state = (round + 1) * 0x9e3779b9 >>> 0;
  const next = () => {  // mulberry32
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
  const order = [...names];
  for (let i = order.length - 1; i > 0; --i) {
    const j = Math.floor(next() * (i + 1));
    [order[i], order[j]] = [order[j], order[i]];
  }
  return order;
}

function percentile(samples, p) {
  if (samples.length === 0) {
    return NaN;
  }
  const sorted = [...samples].sort((a, b) => a - b);
  // Nearest rank: the smallest sample with at least p% of the samples at or below it.
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[rank - 1];
}

function summary(samples) {
  return {
    n: samples.length,
    p50: percentile(samples, 50),
    p95: percentile(samples, 95),
    min: Math.min(...samples),
    max: Math.max(...samples),
  };
}

function procStatus(pid) {
  const text = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const field = (name) => {
    const match = text.match(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm'));
    return match ? Number(match[1]) * 1024 : NaN;
  };
  return { rss: field('VmRSS'), hwm: field('VmHWM'), threads: Number(text.match(/^Threads:\s+(\d+)/m)?.[1]) };
}

const mib = (bytes) => bytes / 1024 ** 2;

function sh(command, args) {
  return execFileSync(command, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })
    .trim();
}

// Sandboxes of one server process (other servers may share the engine), or of any.
function managedContainers(pid) {
  const label = pid === undefined ? 'io.scs.managed' : `io.scs.owner-pid=${pid}`;
  const out = sh('docker', ['ps', '-aq', '--filter', 'label=io.scs.managed', '--filter',
    `label=${label}`]);
  return out === '' ? [] : out.split('\n');
}

// A server's sandboxes other than its idle prepared ones: what its finished runs left.
function leftContainers(pid) {
  const idle = new Set(sh('docker', ['ps', '-q', '--filter', `label=io.scs.owner-pid=${pid}`,
    '--filter', 'label=io.scs.prepared=true', '--filter', 'status=running']).split('\n'));
  return managedContainers(pid).filter((id) => !idle.has(id));
}

function removeBenchLeftovers() {
  const out = sh('docker', ['ps', '-aq', '--filter', `label=${BENCH_LABEL}`]);
  if (out !== '') {
    sh('docker', ['rm', '-f', ...out.split('\n')]);
  }
}

// ---------------------------------------------------------------------------------------------
// The server through the official SDK client

class Server {
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

  async start(code) {
    return this.call('start_run', { code });
  }

  async final(report) {
    while (!FINAL.has(report.status)) {
      report = await this.call('get_result', { run_id: report.run_id, wait_seconds: 30 });
    }
    return report;
  }

  async run(code) {
    return this.final(await this.start(code));
  }

  async close() {
    await this.client.close();
  }
}

function expectTrivial(report) {
  if (report.status !== 'succeeded' || report.stdout !== '1\n') {
    throw new Error(`a trivial run did not succeed: ${report.status} ${report.reason} ` +
      `stdout=${JSON.stringify(report.stdout)} stderr=${JSON.stringify(report.stderr)}`);
  }
}

// ---------------------------------------------------------------------------------------------
// docker run --rm with the equivalent flags

function dockerRunArgs(runtime, code) {
  const args = ['run', '--rm', '--label', `${BENCH_LABEL}=1`, '--runtime', runtime,
    '--network', 'none', '--read-only', '--cap-drop', 'ALL',
    '--security-opt', 'no-new-privileges', '--security-opt', `seccomp=${cfg.seccomp}`,
    '--user', sandbox.user, '--init', '--memory', String(sandbox.memory),
    '--memory-swap', String(sandbox.memory), '--cpus', '2', '--pids-limit', String(sandbox.pids),
    '--shm-size', String(sandbox.shm), '--oom-score-adj', String(sandbox.oomScoreAdj),
    '--log-driver', 'none', '--cgroupns', 'private', '--ipc', 'private',
    '--hostname', 'sandbox', '--workdir', '/workspace'];
  for (const [where, options] of Object.entries(sandbox.tmpfs)) {
    args.push('--tmpfs', `${where}:${options}`);
  }
  for (const limit of sandbox.ulimits) {
    args.push('--ulimit', `${limit.Name}=${limit.Soft}:${limit.Hard}`);
  }
  for (const variable of sandbox.env) {
    args.push('--env', variable);
  }
  args.push(cfg.image, '/usr/bin/python3', '-I', '-c', code);
  return args;
}

// `code` must print "1" (the trivial run) or end its output with "ok".
function dockerRun(runtime, code = TRIVIAL) {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn('docker', dockerRunArgs(runtime, code),
      { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (chunk) => { out += chunk; });
    child.stderr.on('data', (chunk) => { err += chunk; });
    child.on('error', reject);
    child.on('close', (code) => {
      const ms = performance.now() - started;
      if (code !== 0 || (out !== '1\n' && !out.endsWith('ok\n'))) {
        reject(new Error(`docker run failed (exit ${code}): ${err.trim()} stdout=${JSON.stringify(out)}`));
      } else {
        resolve(ms);
      }
    });
  });
}

// ---------------------------------------------------------------------------------------------
// The Engine API, one connection per call as the plugin does

let apiVersion = '1.41';

function engine(method, target, body) {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const headers = { Host: 'docker' };
    if (payload !== undefined) {
      headers['Content-Type'] = 'application/json';
      headers['Content-Length'] = Buffer.byteLength(payload);
    }
    const request = http.request({ socketPath: cfg.socket, method, path: `/v${apiVersion}${target}`,
      headers, agent: false }, (response) => {
      const chunks = [];
      response.on('data', (chunk) => chunks.push(chunk));
      response.on('end', () => {
        const text = Buffer.concat(chunks).toString();
        if (response.statusCode >= 300) {
          reject(new Error(`${method} ${target}: HTTP ${response.statusCode} ${text.trim()}`));
        } else {
          resolve(text === '' ? null : JSON.parse(text));
        }
      });
      response.on('error', reject);
    });
    request.on('error', reject);
    request.end(payload);
  });
}

// Opens a streamed reply (wait) and resolves once the headers arrived, with a promise for the
// parsed body: the wait is registered before the container starts.
function engineStream(method, target) {
  return new Promise((resolve, reject) => {
    const request = http.request({ socketPath: cfg.socket, method, path: `/v${apiVersion}${target}`,
      headers: { Host: 'docker', 'Content-Length': 0 }, agent: false }, (response) => {
      const body = new Promise((resolveBody, rejectBody) => {
        const chunks = [];
        response.on('data', (chunk) => chunks.push(chunk));
        response.on('end', () => {
          const text = Buffer.concat(chunks).toString();
          response.statusCode >= 300 ? rejectBody(new Error(`${target}: ${text}`))
            : resolveBody(JSON.parse(text));
        });
        response.on('error', rejectBody);
      });
      resolve({ body });
    });
    request.on('error', reject);
    request.end();
  });
}

// POST /attach with `Upgrade: tcp`: the raw hijacked socket.
function engineAttach(id) {
  return new Promise((resolve, reject) => {
    const request = http.request({ socketPath: cfg.socket, method: 'POST',
      path: `/v${apiVersion}/containers/${id}/attach?stream=1&stdin=1&stdout=1&stderr=1`,
      headers: { Host: 'docker', Connection: 'Upgrade', Upgrade: 'tcp', 'Content-Length': 0 },
      agent: false });
    request.on('upgrade', (response, socket, head) => resolve({ socket, head }));
    request.on('response', (response) => reject(new Error(`attach: HTTP ${response.statusCode}`)));
    request.on('error', reject);
    request.end();
  });
}

// `init`: Docker's own init as PID 1 (the launcher is PID 1 itself and asks for none).
function createBody(runtime, command, stdin, init = true) {
  return {
    Image: cfg.image,
    Cmd: command,
    Entrypoint: [],
    User: sandbox.user,
    Env: sandbox.env,
    WorkingDir: '/workspace',
    Hostname: 'sandbox',
    Labels: { [BENCH_LABEL]: '1' },
    NetworkDisabled: true,
    AttachStdin: stdin,
    OpenStdin: stdin,
    StdinOnce: stdin,
    AttachStdout: stdin,
    AttachStderr: stdin,
    StopTimeout: 1,
    HostConfig: {
      Runtime: runtime,
      NetworkMode: 'none',
      ReadonlyRootfs: true,
      CapDrop: ['ALL'],
      SecurityOpt: ['no-new-privileges:true', `seccomp=${seccompText}`],
      Init: init,
      Memory: sandbox.memory,
      MemorySwap: sandbox.memory,
      NanoCpus: sandbox.nanoCpus,
      PidsLimit: sandbox.pids,
      Ulimits: sandbox.ulimits,
      ShmSize: sandbox.shm,
      OomScoreAdj: sandbox.oomScoreAdj,
      Tmpfs: sandbox.tmpfs,
      LogConfig: { Type: 'none', Config: {} },
      CgroupnsMode: 'private',
      IpcMode: 'private',
    },
  };
}

let seccompText = '';

async function engineFloor(runtime) {
  const started = performance.now();
  const created = await engine('POST', '/containers/create', createBody(runtime,
    ['/usr/bin/python3', '-I', '-c', TRIVIAL], false));
  const waiting = await engineStream('POST', `/containers/${created.Id}/wait?condition=next-exit`);
  await engine('POST', `/containers/${created.Id}/start`);
  const exit = await waiting.body;
  await engine('DELETE', `/containers/${created.Id}?force=1&v=1`);
  const ms = performance.now() - started;
  if (exit.StatusCode !== 0) {
    throw new Error(`the floor's container exited ${exit.StatusCode}`);
  }
  return ms;
}

// A ustar archive holding main.py, owned by the sandbox user, as the core builds it.
function ustar(name, content) {
  const data = Buffer.from(content);
  const header = Buffer.alloc(512);
  const put = (offset, length, text) => header.write(text, offset, length, 'ascii');
  const octal = (value, length) => value.toString(8).padStart(length - 1, '0') + '\0';
  put(0, 100, name);
  put(100, 8, octal(0o644, 8));
  put(108, 8, octal(10001, 8));
  put(116, 8, octal(10001, 8));
  put(124, 12, octal(data.length, 12));
  put(136, 12, octal(0, 12));
  put(148, 8, '        ');
  put(156, 1, '0');
  put(257, 6, 'ustar\0');
  put(263, 2, '00');
  let sum = 0;
  for (const byte of header) {
    sum += byte;
  }
  put(148, 8, sum.toString(8).padStart(6, '0') + '\0 ');
  const padding = Buffer.alloc((512 - (data.length % 512)) % 512);
  return Buffer.concat([header, data, padding, Buffer.alloc(1024)]);
}

class PreparedSandbox {
  // Created, attached, wait registered and started: the launcher idles on stdin.
  static async make(runtime) {
    const created = await engine('POST', '/containers/create', createBody(runtime,
      ['/usr/bin/python3', '-I', '/opt/scs/launcher.py', '--deadline', '610'], true, false));
    const prepared = new PreparedSandbox(created.Id);
    const { socket, head } = await engineAttach(created.Id);
    prepared.socket = socket;
    prepared.output = [head];
    prepared.ended = new Promise((resolve) => {
      socket.on('data', (chunk) => prepared.output.push(chunk));
      socket.on('end', resolve);
      socket.on('close', resolve);
      socket.on('error', resolve);
    });
    prepared.waiting = await engineStream('POST', `/containers/${created.Id}/wait?condition=next-exit`);
    await engine('POST', `/containers/${created.Id}/start`);
    return prepared;
  }

  constructor(id) {
    this.id = id;
  }

  // Timed: code in, output to its end, exit record.
  async use() {
    const started = performance.now();
    this.socket.end(archive);
    await this.ended;
    const exit = await this.waiting.body;
    const ms = performance.now() - started;
    const stdout = demuxStdout(Buffer.concat(this.output));
    if (exit.StatusCode !== 0 || stdout !== '1\n') {
      throw new Error(`the prepared sandbox exited ${exit.StatusCode} with ${JSON.stringify(stdout)}`);
    }
    return ms;
  }

  async remove() {
    this.socket.destroy();
    await engine('DELETE', `/containers/${this.id}?force=1&v=1`);
  }
}

const archive = ustar('main.py', `${TRIVIAL}\n`);

function demuxStdout(stream) {
  let out = '';
  for (let at = 0; at + 8 <= stream.length;) {
    const size = stream.readUInt32BE(at + 4);
    if (stream[at] === 1) {
      out += stream.subarray(at + 8, at + 8 + size).toString();
    }
    at += 8 + size;
  }
  return out;
}

// Waits until each of these servers has no sandbox left but its prepared ones, all of them
// ready and idle (a server removes a run's sandbox after its report and then prepares a new one,
// whose interpreter then imports the warm modules), so that no contender pays for another's
// clean-up or preparation. At most 10 s, and 5 s for the idling.
async function settle(servers) {
  const filters = encodeURIComponent(JSON.stringify({ label: ['io.scs.managed'] }));
  // A session's sandbox stays between runs by design: only the pool's are waited for.
  const ours = (c, server) => c.Labels?.['io.scs.owner-pid'] === String(server.pid) &&
    !c.Labels?.['io.scs.run-id']?.startsWith('session-');
  const settled = (listed, server) => {
    const own = listed.filter((c) => ours(c, server));
    // At least its --prepared: the pool may keep more after runs arrived together.
    return own.length >= server.prepared &&
      own.every((c) => c.Labels?.['io.scs.prepared'] === 'true' && c.State === 'running');
  };
  for (const deadline = Date.now() + 10_000; Date.now() < deadline;) {
    const listed = await engine('GET', `/containers/json?all=1&filters=${filters}`);
    if (servers.every((server) => settled(listed, server))) {
      // A sandbox the engine reports running may be a few ms from the server's pool, and its
      // interpreter may still be importing the warm modules: wait until it idles.
      await sleep(20);
      const ids = listed.filter((c) => servers.some((server) => ours(c, server))).map((c) => c.Id);
      await quiet(ids);
      // The last run is reported before its sandbox ends (the early report): one that looked
      // like an idle prepared sandbox may have been that run's, ending now. Settled only if
      // the same sandboxes are still there and still running.
      const again = await engine('GET', `/containers/json?all=1&filters=${filters}`);
      const still = again.filter((c) => servers.some((server) => ours(c, server)));
      if (still.length === ids.length && still.every((c) => ids.includes(c.Id)) &&
          servers.every((server) => settled(again, server))) {
        return;
      }
      continue;
    }
    await sleep(5);
  }
  progress('warning: a server\'s sandboxes had not settled 10 s after its run');
}

// CPU time a container has used, in ns, from its cgroup (v1 or v2); null when unreadable.
function cpuNanos(id) {
  try {
    return Number(fs.readFileSync(`/sys/fs/cgroup/cpuacct/docker/${id}/cpuacct.usage`, 'utf8'));
  } catch {
    try {
      const stat = fs.readFileSync(`/sys/fs/cgroup/system.slice/docker-${id}.scope/cpu.stat`, 'utf8');
      return Number(/usage_usec (\d+)/.exec(stat)[1]) * 1000;
    } catch {
      return null;
    }
  }
}

// Waits, up to 5 s, until the containers use less than 2 ms of CPU in 50 ms: idle.
async function quiet(ids) {
  for (const deadline = Date.now() + 5000; Date.now() < deadline;) {
    const before = ids.map(cpuNanos);
    await sleep(50);
    const after = ids.map(cpuNanos);
    if (after.every((value, i) => value === null || before[i] === null ||
        value - before[i] < 2e6)) {
      return;
    }
  }
  progress('warning: a prepared sandbox was still busy 5 s after it started');
}

// ---------------------------------------------------------------------------------------------
// Phases

const results = { config: { ...cfg, seccomp: path.relative(root, cfg.seccomp) }, machine: {},
  phases: {} };

function machineInfo() {
  const docker = JSON.parse(sh('docker', ['version', '--format', '{{json .}}']));
  const info = JSON.parse(sh('docker', ['info', '--format', '{{json .}}']));
  const cpu = os.cpus()[0]?.model ?? 'unknown';
  return {
    nproc: os.cpus().length,
    cpu,
    memory_gib: +(os.totalmem() / 1024 ** 3).toFixed(1),
    kernel: `${os.type()} ${os.release()}`,
    docker: docker.Server?.Version,
    api: docker.Server?.ApiVersion,
    storage: info.Driver,
    cgroup: info.CgroupVersion,
    runtimes: Object.keys(info.Runtimes ?? {}),
    image: sh('docker', ['image', 'inspect', '-f', '{{.Id}}', cfg.image]).slice(7, 19),
    node: process.version,
    server: cfg.server,
  };
}

// Every contender once a round, in an order shuffled each round (roundOrder).
async function latency(runtime) {
  progress(`latency (${runtime}): starting the server`);
  const server = await Server.start(runtime);
  const idle = procStatus(server.pid);
  const fresh = await Server.start(runtime, { prepared: 0 });
  const other = cfg.compare ? await Server.start(runtime,
    { binary: cfg.compare, extraArgs: cfg.compareArgs, prepared: null }) : null;
  let prepared = await PreparedSandbox.make(runtime);
  const viaMcp = async (target) => {
    const started = performance.now();
    const report = await target.run(TRIVIAL);
    const ms = performance.now() - started;
    expectTrivial(report);
    return ms;
  };
  const contenders = {
    mcp: () => viaMcp(server),
    fresh: () => viaMcp(fresh),
    ...(other ? { compare: () => viaMcp(other) } : {}),
    docker: () => dockerRun(runtime),
    floor: () => engineFloor(runtime),
    prepared: async () => {
      const ms = await prepared.use();
      await prepared.remove();
      // Ahead of the next round, and let idle: its interpreter's start-up would otherwise fall
      // on whichever contender comes next.
      prepared = await PreparedSandbox.make(runtime);
      await quiet([prepared.id]);
      return ms;
    },
  };
  const names = Object.keys(contenders);
  const samples = Object.fromEntries(names.map((name) => [name, []]));
  const load = [os.loadavg()[0]];
  const rounds = cfg.warmup + cfg.runs;
  try {
    for (let round = 0; round < rounds; ++round) {
      for (const name of roundOrder(names, round)) {
        const ms = await contenders[name]();
        if (round >= cfg.warmup) {
          samples[name].push(ms);
        }
        await settle([server, fresh, other].filter(Boolean));
      }
      if (round === cfg.warmup - 1) {
        server.steps = {};  // the step timings cover the measured rounds only
        fresh.steps = {};
        if (other) {
          other.steps = {};
        }
      }
      if ((round + 1) % 10 === 0 || round + 1 === rounds) {
        const medians = names.map((name) => `${name} ${ms(percentile(samples[name], 50))}`);
        progress(`latency (${runtime}): round ${round + 1}/${rounds}, p50 so far: ` +
          `${medians.join(', ')} ms`);
      }
    }
  } finally {
    await prepared.remove().catch(() => {});
    await server.close();
    await fresh.close();
    await other?.close();
  }
  load.push(os.loadavg()[0]);
  const stepSummary = (target) => Object.fromEntries(Object.entries(target.steps)
    .map(([name, values]) => [name, summary(values)]));
  const steps = stepSummary(server);
  const freshSteps = stepSummary(fresh);
  return {
    runtime,
    idle_rss: idle.rss,
    load,
    ...Object.fromEntries(names.map((name) => [name, summary(samples[name])])),
    samples,
    steps,
    fresh_steps: freshSteps,
    ...(other ? { compare_steps: stepSummary(other), compare_binary: cfg.compare } : {}),
    server_errors: [...server.errors, ...fresh.errors],
  };
}

// 200 runs submitted at once against the same 200 run one after another with docker run;
// the docker runs are split around the server's batch (ABA) so a drift in load hits both.
async function throughput() {
  const n = cfg.throughput;
  const server = await Server.start('runc',
    { logLevel: 'info', extraArgs: ['--max-concurrent', String(cfg.concurrency)] });
  const dockerTimes = [];
  const sequential = async (count) => {
    const started = performance.now();
    for (let i = 0; i < count; ++i) {
      dockerTimes.push(await dockerRun('runc'));
      if ((dockerTimes.length) % 50 === 0) {
        progress(`throughput: docker run ${dockerTimes.length}/${n}`);
      }
    }
    return performance.now() - started;
  };
  const load = [os.loadavg()[0]];
  let dockerMs = 0;
  let mcpMs = 0;
  try {
    await server.run(TRIVIAL);  // warm
    dockerMs += await sequential(Math.floor(n / 2));
    progress(`throughput: ${n} runs submitted at once to the server (concurrency ${cfg.concurrency})`);
    const started = performance.now();
    const accepted = await Promise.all(Array.from({ length: n }, () => server.start(TRIVIAL)));
    let done = 0;
    for (const report of accepted) {
      expectTrivial(await server.final(report));
      if (++done % 50 === 0) {
        progress(`throughput: server ${done}/${n} final`);
      }
    }
    mcpMs = performance.now() - started;
    dockerMs += await sequential(n - Math.floor(n / 2));
  } finally {
    await server.close();
  }
  load.push(os.loadavg()[0]);
  return {
    runs: n,
    concurrency: cfg.concurrency,
    mcp_seconds: mcpMs / 1000,
    mcp_rate: n / (mcpMs / 1000),
    docker_seconds: dockerMs / 1000,
    docker_rate: n / (dockerMs / 1000),
    load,
  };
}

function sampler(pid, intervalMs) {
  let peak = 0;
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      try {
        peak = Math.max(peak, procStatus(pid).rss);
      } catch {
        return;
      }
      await sleep(intervalMs);
    }
  })();
  return { stop: async () => { stopped = true; await loop; return peak; } };
}

async function memory() {
  const server = await Server.start('runc', { logLevel: 'info' });
  const load = [os.loadavg()[0]];
  const bytes = cfg.floodMiB * 1024 * 1024;
  const chunks = Math.ceil(bytes / 65536);
  const flood = 'import sys\nchunk = b"x" * 65536\nwrite = sys.stdout.buffer.write\n' +
    `for _ in range(${chunks}):\n    write(chunk)\n`;
  try {
    const initialized = procStatus(server.pid);
    await sleep(1000);
    const idle = procStatus(server.pid);
    progress(`memory: idle VmRSS ${mib(idle.rss).toFixed(1)} MiB; flooding with ` +
      `${cfg.concurrency} runs of ${cfg.floodMiB} MiB each`);
    const watch = sampler(server.pid, 10);
    const reports = await Promise.all(Array.from({ length: cfg.concurrency },
      () => server.run(flood)));
    const sampledPeak = await watch.stop();
    const after = procStatus(server.pid);
    for (const report of reports) {
      if (report.status !== 'succeeded' || report.stdout_bytes !== chunks * 65536 ||
          !report.stdout_truncated) {
        throw new Error(`a flood run ended ${report.status} with ${report.stdout_bytes} bytes: ` +
          report.reason);
      }
    }
    await sleep(1000);
    const settled = procStatus(server.pid);
    return {
      initialized_rss: initialized.rss,
      idle_rss: idle.rss,
      idle_threads: idle.threads,
      flood_runs: cfg.concurrency,
      flood_bytes_each: chunks * 65536,
      flood_seconds_max: Math.max(...reports.map((r) => r.duration_seconds)),
      flood_peak_rss: Math.max(sampledPeak, after.hwm),
      flood_hwm: after.hwm,
      flood_sampled_peak: sampledPeak,
      after_flood_rss: settled.rss,
      load: [load[0], os.loadavg()[0]],
    };
  } finally {
    await server.close();
  }
}

async function soak() {
  const n = cfg.soak;
  const server = await Server.start('runc', { logLevel: 'info' });
  const curve = [];
  let failures = 0;
  let left = [];
  let leftAtOnce = 0;
  let soakLoad;
  let started;
  let baseline;
  let elapsed;
  let end;
  try {
    const pool = async (count, onDone) => {
      let next = 0;
      const worker = async () => {
        while (next < count) {
          next += 1;
          const report = await server.run(TRIVIAL);
          if (report.status !== 'succeeded' || report.stdout !== '1\n') {
            failures += 1;
          }
          onDone();
        }
      };
      await Promise.all(Array.from({ length: cfg.concurrency }, worker));
    };
    const load = [os.loadavg()[0]];
    await pool(20, () => {});  // warm: threads, arenas, the registry's first entries
    await sleep(500);
    baseline = procStatus(server.pid);
    curve.push([0, baseline.rss]);
    let done = 0;
    started = performance.now();
    await pool(n, () => {
      done += 1;
      if (done % 100 === 0 || done === n) {
        const status = procStatus(server.pid);
        curve.push([done, status.rss]);
        progress(`soak: ${done}/${n}, VmRSS ${mib(status.rss).toFixed(1)} MiB`);
      }
    });
    elapsed = (performance.now() - started) / 1000;
    soakLoad = [load[0], os.loadavg()[0]];
    left = leftContainers(server.pid);
    leftAtOnce = left.length;
    // Removal trails the report: the core reports a run before it removes the sandbox.
    for (const deadline = Date.now() + 5000; left.length > 0 && Date.now() < deadline;) {
      await sleep(100);
      left = leftContainers(server.pid);
    }
  } finally {
    await sleep(500);
    end = procStatus(server.pid);
    await server.close();
  }
  await sleep(500);
  const leftAfterExit = managedContainers(server.pid);
  return {
    runs: n,
    concurrency: cfg.concurrency,
    seconds: elapsed,
    failures,
    baseline_rss: baseline.rss,
    end_rss: end.rss,
    growth: end.rss - baseline.rss,
    end_hwm: end.hwm,
    end_threads: end.threads,
    left_when_all_final: leftAtOnce,
    left_while_serving: left.length,
    left_after_exit: leftAfterExit.length,
    load: soakLoad,
    curve,
  };
}

// ---------------------------------------------------------------------------------------------
// Report

const ms = (value) => (Number.isFinite(value) ? value.toFixed(0) : 'n/a');
const MiB = (value) => (Number.isFinite(value) ? mib(value).toFixed(1) : 'n/a');
const ratio = (value) => (Number.isFinite(value) ? value.toFixed(2) : 'n/a');
const verdict = (ok) => (ok ? 'met' : 'MISSED');

function table() {
  const lines = [];
  const m = results.machine;
  lines.push(`Machine: ${m.nproc} x ${m.cpu}, ${m.memory_gib} GiB, ${m.kernel}, Docker ` +
    `${m.docker} (API ${m.api}, ${m.storage}, cgroup v${m.cgroup}), runtimes ${m.runtimes.join(', ')}; ` +
    `image ${results.image_requested} (${m.image}); node ${m.node}.`);
  const phaseLoad = Object.entries(results.phases).filter(([, p]) => p.load)
    .map(([name, p]) => `${name} ${p.load.map((v) => v.toFixed(1)).join('->')}`);
  lines.push(`Load average (1 min): ${results.load.map((v) => v.toFixed(2)).join(' -> ')} ` +
    `(start -> end of the run; ${m.nproc} cores); by phase: ${phaseLoad.join(', ')}.`);
  lines.push(`Runs per contender: ${cfg.runs} measured after ${cfg.warmup} warm-up rounds, ` +
    'in an order shuffled each round; percentiles are nearest-rank.');
  if (cfg.label) {
    lines.push(`Label: ${cfg.label}`);
  }
  lines.push('');

  const lat = [];
  for (const key of ['latency', 'runsc']) {
    const phase = results.phases[key];
    if (!phase || phase.skipped) {
      continue;
    }
    lat.push(phase);
  }
  if (lat.length > 0) {
    lines.push('| settled (the server idle and its pool ready before each run): trivial run `print(1)`, ms | runtime | p50 | p95 | min | max |');
    lines.push('|---|---|---:|---:|---:|---:|');
    const names = {
      mcp: 'server over MCP stdio (SDK client), prepared sandbox',
      fresh: 'the same, `--prepared 0`: a sandbox created per run',
      docker: '`docker run --rm`, same controls',
      floor: 'Engine API floor: create, start, wait, remove',
      prepared: 'Engine API, prepared sandbox (informational)',
      compare: `compared: \`${[path.basename(cfg.compare), ...cfg.compareArgs].join(' ')}\` over MCP`,
    };
    for (const phase of lat) {
      for (const [key, name] of Object.entries(names)) {
        const s = phase[key];
        if (!s) {
          continue;
        }
        lines.push(`| ${name} | ${phase.runtime} | ${ms(s.p50)} | ${ms(s.p95)} | ${ms(s.min)} | ${ms(s.max)} |`);
      }
    }
    lines.push('');
  }

  const ar = results.phases.arrivals;
  if (ar) {
    lines.push(`At clients' arrivals, never waiting for the server (${ar.rounds} rounds each, ` +
      'alternating with `docker run --rm` at the same arrivals), ms per run:');
    lines.push('');
    lines.push('| arrivals, program | MCP p50 | MCP p95 | `docker run` p50 | `docker run` p95 | p50 ratio | p95 ratio |');
    lines.push('|---|---:|---:|---:|---:|---:|---:|');
    for (const [key, p] of Object.entries(ar.patterns)) {
      lines.push(`| ${key} | ${ms(p.mcp.p50)} | ${ms(p.mcp.p95)} | ${ms(p.docker.p50)} | ` +
        `${ms(p.docker.p95)} | ${ratio(p.ratio_p50)} | ${ratio(p.ratio_p95)} |`);
    }
    lines.push('');
    if (ar.capacity) {
      const ladder = ar.capacity.ladder.map((l) => `${l.rate}/s: p95 ${ms(l.p95)}`).join(', ');
      lines.push(`Capacity: ${ar.capacity.held_rate} trivial runs/s held with p95 under twice ` +
        `the idle p50 (${ms(ar.capacity.idle_p50)} ms at one every 2 s; ${ladder}).`);
    }
    if (ar.session) {
      lines.push(`open_session to the first answered print(1): p50 ${ms(ar.session.p50)} ms, ` +
        `p95 ${ms(ar.session.p95)} ms.`);
    }
    lines.push('');
  }

  if (results.phases.session) {
    const se = results.phases.session;
    lines.push('| one `start_run` with `wait_seconds`, ms | p50 | p95 | min | max |');
    lines.push('|---|---:|---:|---:|---:|');
    for (const [key, name] of [['trivial_session', 'trivial run in a session'],
      ['trivial_fresh', 'trivial run, fresh (prepared) sandbox'],
      ['analysis_session', 'analysis snippet in a session'],
      ['analysis_fresh', 'analysis snippet, fresh (prepared, warm) sandbox']]) {
      const s = se[key];
      lines.push(`| ${name} | ${ms(s.p50)} | ${ms(s.p95)} | ${ms(s.min)} | ${ms(s.max)} |`);
    }
    lines.push('');
  }

  for (const [phase, runtime] of [['analysis', 'runc'], ['runsc_analysis', 'runsc']]) {
    const an = results.phases[phase];
    if (!an) {
      continue;
    }
    lines.push(`| settled: analysis snippet (pandas, numpy, matplotlib to a PNG), ${runtime}, ms | p50 | p95 | min | max |`);
    lines.push('|---|---:|---:|---:|---:|');
    for (const [key, name] of [['warm', 'server over MCP, prepared sandbox with a warm interpreter' +
      (runtime === 'runsc' ? ' (`--warm-modules` named)' : '')],
      ['cold', 'the same, `--warm-modules none`' + (runtime === 'runsc' ? ' (the default)' : '')],
      ['docker', '`docker run --rm`, same controls']]) {
      const s = an[key];
      lines.push(`| ${name} | ${ms(s.p50)} | ${ms(s.p95)} | ${ms(s.min)} | ${ms(s.max)} |`);
    }
    lines.push('');
  }
  if (results.phases.burst) {
    const bu = results.phases.burst;
    lines.push(`| burst of trivial runs started at once (${bu.pause_ms} ms between bursts), ms per run | p50 | p95 | min | max |`);
    lines.push('|---|---:|---:|---:|---:|');
    for (const n of bu.sizes) {
      for (const [who, name] of [['mcp', 'server over MCP'], ['docker', '`docker run --rm`']]) {
        const s = bu[`${who}_${n}`];
        lines.push(`| ${n} at once: ${name} | ${ms(s.p50)} | ${ms(s.p95)} | ${ms(s.min)} | ${ms(s.max)} |`);
      }
    }
    lines.push('');
  }

  const targets = [];
  const lr = results.phases.latency;
  if (lr) {
    const r50 = lr.mcp.p50 / lr.docker.p50;
    const r95 = lr.mcp.p95 / lr.docker.p95;
    targets.push(['trivial: MCP p50 / `docker run` p50 (runc)', ratio(r50), '<= 0.12', verdict(r50 <= 0.12)]);
    targets.push(['trivial: MCP p95 / `docker run` p95 (runc)', ratio(r95), '<= 0.25', verdict(r95 <= 0.25)]);
    targets.push(['MCP p50 / Engine API floor p50 (runc)', ratio(lr.mcp.p50 / lr.floor.p50), '-', '-']);
    if (lr.fresh) {
      targets.push(['MCP `--prepared 0` p50 / `docker run` p50 (runc)', ratio(lr.fresh.p50 / lr.docker.p50), '-', '-']);
    }
  }
  const an = results.phases.analysis;
  if (an) {
    const r = an.warm.p50 / an.docker.p50;
    targets.push(['analysis: MCP p50 / `docker run` p50 (runc)', ratio(r), '<= 0.15', verdict(r <= 0.15)]);
    targets.push(['analysis: MCP p95 / `docker run` p95 (runc)', ratio(an.warm.p95 / an.docker.p95), '-', '-']);
    targets.push(['analysis: MCP `--warm-modules none` p50 / `docker run` p50', ratio(an.cold.p50 / an.docker.p50), '-', '-']);
    targets.push(['idle prepared sandbox, warm interpreter, MiB (p50)', MiB(an.idle_warm.p50), '-', '-']);
    targets.push(['idle prepared sandbox, `--warm-modules none`, MiB (p50)', MiB(an.idle_cold.p50), '-', '-']);
  }
  const bu = results.phases.burst;
  if (bu) {
    for (const n of bu.sizes) {
      const r = bu[`mcp_${n}`].p50 / bu[`docker_${n}`].p50;
      targets.push([`burst of ${n}: MCP p50 / \`docker run\` p50 (each run, ${n} at once)`, ratio(r),
        n === 4 ? '<= 0.30' : '-', n === 4 ? verdict(r <= 0.3) : '-']);
    }
  }
  const rs = results.phases.runsc;
  if (rs && !rs.skipped) {
    targets.push(['MCP p50 / `docker run` p50 (runsc)', ratio(rs.mcp.p50 / rs.docker.p50), '(<= 0.30)', verdict(rs.mcp.p50 / rs.docker.p50 <= 0.3)]);
    targets.push(['MCP p95 / `docker run` p95 (runsc)', ratio(rs.mcp.p95 / rs.docker.p95), '(<= 0.50)', verdict(rs.mcp.p95 / rs.docker.p95 <= 0.5)]);
  }
  const ra = results.phases.runsc_analysis;
  if (ra) {
    targets.push(['runsc analysis: MCP p50 / `docker run` p50, the default (no warm imports)', ratio(ra.cold.p50 / ra.docker.p50), '<= 0.30', verdict(ra.cold.p50 / ra.docker.p50 <= 0.3)]);
    targets.push(['runsc analysis: the same with `--warm-modules` named', ratio(ra.warm.p50 / ra.docker.p50), '-', '-']);
  }
  const tp = results.phases.throughput;
  if (tp) {
    const r = tp.mcp_rate / tp.docker_rate;
    targets.push([`throughput: server, ${tp.runs} at once, concurrency ${tp.concurrency}`,
      `${tp.mcp_rate.toFixed(2)} runs/s (${tp.mcp_seconds.toFixed(1)} s)`, '', '']);
    targets.push([`throughput: \`docker run --rm\`, ${tp.runs} sequential`,
      `${tp.docker_rate.toFixed(2)} runs/s (${tp.docker_seconds.toFixed(1)} s)`, '', '']);
    targets.push(['throughput ratio', ratio(r), '>= 2', verdict(r >= 2)]);
  }
  const mem = results.phases.memory;
  if (mem) {
    targets.push(['server VmRSS idle, MiB', MiB(mem.idle_rss), '<= 20', verdict(mib(mem.idle_rss) <= 20)]);
    targets.push([`server peak RSS (VmHWM), ${mem.flood_runs} runs x ${MiB(mem.flood_bytes_each)} MiB output, MiB`,
      MiB(mem.flood_peak_rss), '<= 64', verdict(mib(mem.flood_peak_rss) <= 64)]);
  }
  const sk = results.phases.soak;
  if (sk) {
    targets.push([`soak: ${sk.runs} runs (${sk.failures} failed), containers left`,
      `${sk.left_while_serving} while serving, ${sk.left_after_exit} after exit`, '0',
      verdict(sk.left_while_serving === 0 && sk.left_after_exit === 0)]);
    targets.push(['soak: VmRSS growth, MiB', `${MiB(sk.growth)} (${MiB(sk.baseline_rss)} -> ${MiB(sk.end_rss)})`,
      '<= 5', verdict(mib(sk.growth) <= 5)]);
  }
  const te = results.phases.tenants;
  if (te) {
    const all = (who) => Object.entries(te.statuses[who]).map(([s, n]) => `${n} ${s}`).join(', ');
    targets.push([`tenants: ${te.runs} runs, alice / mallory`, `${all('alice')} / ${all('mallory')}`,
      '', '']);
    targets.push([`tenants: alice's print(1) p50 / p95 beside mallory, ${te.idle_connections} ` +
      `idle connections, ${te.long_polls} long-polls (${te.polls.refused} refused)`,
      `${ms(te.alice_p50)} / ${ms(te.alice_p95)} ms`, '', '']);
    targets.push(['tenants: VmRSS half way -> end, MiB',
      `${MiB(te.half_rss)} -> ${MiB(te.end_rss)} (from ${MiB(te.baseline_rss)})`, 'growth <= 5',
      verdict(mib(te.end_rss - te.half_rss) <= 5)]);
  }
  if (targets.length > 0) {
    lines.push('| measure | value | target | verdict |');
    lines.push('|---|---|---|---|');
    for (const row of targets) {
      lines.push(`| ${row.join(' | ')} |`);
    }
    lines.push('');
  }

  for (const phase of lat) {
    if (Object.keys(phase.steps).length === 0) {
      continue;
    }
    lines.push(`Where a server run's time goes (${phase.runtime}, docker plugin debug timings, ms; ` +
      'for the prepared server, create to start happen in the pool, off the run\'s path):');
    lines.push('');
    const columns = [['prepared', phase.steps], ['`--prepared 0`', phase.fresh_steps ?? {}]];
    if (phase.compare_steps) {
      columns.push(['compared', phase.compare_steps]);
    }
    lines.push(`| step | ${columns.map(([label]) => `${label} p50 | ${label} p95`).join(' | ')} |`);
    lines.push(`|---|${columns.map(() => '---:|---:').join('|')}|`);
    const stepNames = [...new Set(columns.flatMap(([, steps]) => Object.keys(steps)))];
    const cell = (s) => (s ? `${s.p50.toFixed(1)} | ${s.p95.toFixed(1)}` : '- | -');
    for (const name of stepNames) {
      lines.push(`| ${name} | ${columns.map(([, steps]) => cell(steps[name])).join(' | ')} |`);
    }
    lines.push('');
  }
  return lines.join('\n');
}

function expectAnalysis(report) {
  if (report.status !== 'succeeded' || !report.stdout.endsWith('ok\n') ||
      !report.files?.some((file) => file.path === 'plot.png')) {
    throw new Error(`an analysis run did not succeed: ${report.status} ${report.reason} ` +
      `stderr=${JSON.stringify(report.stderr?.slice(-400))}`);
  }
}

// Memory the engine counts for the server's idle prepared sandboxes (usage less page cache,
// as `docker stats` shows it), in bytes, one value per sandbox.
async function preparedMemory(server) {
  const filters = encodeURIComponent(JSON.stringify({ label: ['io.scs.prepared=true'] }));
  const listed = await engine('GET', `/containers/json?filters=${filters}`);
  const own = listed.filter((c) => c.Labels?.['io.scs.owner-pid'] === String(server.pid));
  const values = [];
  for (const container of own) {
    const stats = await engine('GET', `/containers/${container.Id}/stats?stream=false`);
    const memory = stats.memory_stats ?? {};
    const cache = memory.stats?.cache ?? memory.stats?.inactive_file ?? 0;
    if (Number.isFinite(memory.usage)) {
      values.push(memory.usage - cache);
    }
  }
  return values;
}

// The analysis snippet, interleaved: the server with its warm interpreter, the same server with
// --warm-modules none, and docker run --rm. Each server's prepared sandbox is measured idle
// before every round.
// Under runsc the server warms nothing by default (a warm interpreter's forks cost far more
// memory there, docs/SECURITY.md 3a): `warm` names the modules, `cold` is the default.
async function analysis(runtime = 'runc') {
  progress(`analysis (${runtime}): starting the servers`);
  const warm = await Server.start(runtime, { extraArgs: runtime === 'runsc'
    ? ['--warm-modules', 'numpy,pandas,matplotlib.pyplot'] : [] });
  const cold = await Server.start(runtime, { extraArgs: ['--warm-modules', 'none'] });
  const contenders = {
    warm: async () => { const t = performance.now(); expectAnalysis(await warm.run(ANALYSIS)); return performance.now() - t; },
    cold: async () => { const t = performance.now(); expectAnalysis(await cold.run(ANALYSIS)); return performance.now() - t; },
    docker: () => dockerRun(runtime, ANALYSIS),
  };
  const names = Object.keys(contenders);
  const samples = Object.fromEntries(names.map((name) => [name, []]));
  const idle = { warm: [], cold: [] };
  const load = [os.loadavg()[0]];
  const rounds = 2 + cfg.analysisRuns;
  try {
    for (let round = 0; round < rounds; ++round) {
      await settle([warm, cold]);
      idle.warm.push(...await preparedMemory(warm));
      idle.cold.push(...await preparedMemory(cold));
      for (const name of roundOrder(names, round)) {
        const ms = await contenders[name]();
        if (round >= 2) {
          samples[name].push(ms);
        }
        await settle([warm, cold]);
      }
      if ((round + 1) % 5 === 0 || round + 1 === rounds) {
        progress(`analysis (${runtime}): round ${round + 1}/${rounds}, p50 so far: ` +
          names.map((name) => `${name} ${ms(percentile(samples[name], 50))}`).join(', ') + ' ms');
      }
    }
  } finally {
    await warm.close();
    await cold.close();
  }
  load.push(os.loadavg()[0]);
  return {
    ...Object.fromEntries(names.map((name) => [name, summary(samples[name])])),
    idle_warm: summary(idle.warm),
    idle_cold: summary(idle.cold),
    samples,
    load,
    server_errors: [...warm.errors, ...cold.errors],
  };
}

// A session against fresh runs, interleaved on one server: the trivial run and the analysis
// snippet, each in the session (its interpreter has everything imported after the first run)
// and in a fresh prepared sandbox, every run answered in one start_run call (wait_seconds).
async function session() {
  progress('session: starting the server');
  const server = await Server.start('runc');
  await settle([server]);  // the session begins in the prepared sandbox, as an agent's would
  const opened = await server.call('open_session', {});
  // Its container keeps the prepared labels, so settle() counts it among the pool's.
  const own = encodeURIComponent(JSON.stringify({ label: [`io.scs.owner-pid=${server.pid}`] }));
  if (!(await engine('GET', `/containers/json?filters=${own}`))
    .some((c) => c.Labels?.['io.scs.run-id']?.startsWith('session-'))) {
    server.prepared += 1;
  }
  const inSession = async (code) => server.final(await server.call('start_run',
    { code, session_id: opened.session_id, wait_seconds: 30 }));
  const fresh = async (code) => server.final(await server.call('start_run', { code, wait_seconds: 30 }));
  const timed = (fn, code, check) => async () => {
    const t = performance.now();
    check(await fn(code));
    return performance.now() - t;
  };
  const contenders = {
    trivial_session: timed(inSession, TRIVIAL, expectTrivial),
    trivial_fresh: timed(fresh, TRIVIAL, expectTrivial),
    analysis_session: timed(inSession, ANALYSIS, expectAnalysis),
    analysis_fresh: timed(fresh, ANALYSIS, expectAnalysis),
  };
  const names = Object.keys(contenders);
  const samples = Object.fromEntries(names.map((name) => [name, []]));
  const load = [os.loadavg()[0]];
  const rounds = 2 + cfg.analysisRuns;
  try {
    for (let round = 0; round < rounds; ++round) {
      for (const name of roundOrder(names, round)) {
        await settle([server]);
        const ms = await contenders[name]();
        if (round >= 2) {
          samples[name].push(ms);
        }
      }
    }
    await server.call('close_session', { session_id: opened.session_id });
  } finally {
    await server.close();
  }
  load.push(os.loadavg()[0]);
  return {
    ...Object.fromEntries(names.map((name) => [name, summary(samples[name])])),
    samples,
    load,
    server_errors: [...server.errors],
  };
}

// Bursts of trivial runs started at once (an agent fanning out), against as many `docker run
// --rm` at once; every run's own time from its start to its final report. Bursts of 4 and 8
// alternate, with a pause between bursts.
async function burst() {
  const sizes = [4, 8];
  const server = await Server.start('runc',
    { extraArgs: ['--max-concurrent', String(cfg.concurrency)] });
  const samples = Object.fromEntries(sizes.flatMap((n) => [[`mcp_${n}`, []], [`docker_${n}`, []]]));
  const load = [os.loadavg()[0]];
  const rounds = 1 + cfg.burstRounds;
  const viaMcp = async () => {
    const t = performance.now();
    expectTrivial(await server.run(TRIVIAL));
    return performance.now() - t;
  };
  try {
    for (let round = 0; round < rounds; ++round) {
      for (const n of sizes) {
        const order = (round % 2 === 0) ? ['mcp', 'docker'] : ['docker', 'mcp'];
        for (const who of order) {
          const times = await Promise.all(Array.from({ length: n },
            () => (who === 'mcp' ? viaMcp() : dockerRun('runc'))));
          if (round >= 1) {
            samples[`${who}_${n}`].push(...times);
          }
          await sleep(cfg.burstPauseMs);
          // After the first burst the pool wants as many as arrived together, up to its
          // ceiling (--prepared-max, 4 by default).
          server.prepared = Math.min(4, Math.max(...sizes.slice(0, sizes.indexOf(n) + 1)));
          await settle([server]);
        }
      }
      progress(`burst: round ${round + 1}/${rounds}, p50 so far: ` +
        Object.keys(samples).map((key) => `${key} ${ms(percentile(samples[key], 50))}`).join(', ') + ' ms');
    }
  } finally {
    await server.close();
  }
  load.push(os.loadavg()[0]);
  return {
    sizes,
    pause_ms: cfg.burstPauseMs,
    ...Object.fromEntries(Object.entries(samples).map(([key, values]) => [key, summary(values)])),
    samples,
    load,
    server_errors: server.errors,
  };
}

async function main() {
  progress(`config: ${JSON.stringify({ ...cfg, server: undefined })}`);
  if (!fs.existsSync(cfg.server)) {
    throw new Error(`no server binary at ${cfg.server}`);
  }
  seccompText = fs.readFileSync(cfg.seccomp, 'utf8');
  // Pinned for the whole run: a rebuild of the tag meanwhile must not mix two images.
  const imageId = sh('docker', ['image', 'inspect', '-f', '{{.Id}}', cfg.image]);
  results.image_requested = cfg.image;
  cfg.image = `scs-bench:${imageId.replace('sha256:', '').slice(0, 12)}`;
  sh('docker', ['tag', imageId, cfg.image]);
  const version = JSON.parse(sh('docker', ['version', '--format', '{{json .Server}}']));
  apiVersion = version.ApiVersion;
  results.machine = machineInfo();
  results.load = [os.loadavg()[0]];
  results.started = new Date().toISOString();
  removeBenchLeftovers();
  const before = managedContainers();
  if (before.length > 0) {
    progress(`warning: ${before.length} io.scs.managed containers exist before the run`);
  }
  results.managed_before = before.length;

  const want = (name) => cfg.phases.includes(name);
  try {
    if (want('arrivals')) {
      results.phases.arrivals = await arrivals(cfg, { Server, dockerRun, progress, summary,
        codes: { trivial: TRIVIAL, analysis: ANALYSIS } });
    }
    if (want('latency')) {
      results.phases.latency = await latency('runc');
    }
    if (want('analysis')) {
      results.phases.analysis = await analysis();
    }
    if (want('burst')) {
      results.phases.burst = await burst();
    }
    if (want('session')) {
      results.phases.session = await session();
    }
    if (want('runsc')) {
      const registered = results.machine.runtimes.includes('runsc');
      if (cfg.runsc === '0' || (!registered && cfg.runsc !== '1')) {
        results.phases.runsc = { skipped: registered ? 'BENCH_RUNSC=0' : 'runsc is not registered' };
      } else {
        results.phases.runsc = await latency('runsc');
        results.phases.runsc_analysis = await analysis('runsc');
      }
    }
    if (want('throughput')) {
      results.phases.throughput = await throughput();
    }
    if (want('memory')) {
      results.phases.memory = await memory();
    }
    if (want('soak') && cfg.soak > 0) {
      progress(`soak: ${cfg.soak} runs, ${cfg.concurrency} at a time`);
      results.phases.soak = await soak();
    }
    if (want('tenants') && cfg.tenantSoak > 0) {
      progress(`tenants: ${cfg.tenantSoak} runs of two tenants, one hostile`);
      results.phases.tenants = await tenantSoak(cfg, { progress, procStatus, percentile });
    }
  } finally {
    // Never masks the error that ended the run.
    try {
      removeBenchLeftovers();
      sh('docker', ['rmi', '--no-prune', cfg.image]);
    } catch (error) {
      progress(`clean-up failed (bench containers, tag ${cfg.image}): ${error.message.trim()}`);
    }
  }
  results.load.push(os.loadavg()[0]);
  results.finished = new Date().toISOString();

  const text = table();
  process.stdout.write(`${text}\n`);
  fs.mkdirSync(cfg.resultsDir, { recursive: true });
  const stamp = results.started.replace(/:/g, '').replace(/\..*/, '');
  const base = path.join(cfg.resultsDir, stamp);
  fs.writeFileSync(`${base}.md`, `# Benchmark ${results.started}\n\n${text}\n`);
  fs.writeFileSync(`${base}.json`, `${JSON.stringify(results, null, 1)}\n`);
  progress(`wrote ${path.relative(root, base)}.md and .json`);
}

if (process.argv.length > 2) {
  process.stderr.write('usage: node bench/bench.mjs (no arguments; settings are BENCH_* ' +
    'environment variables, see docs/BENCHMARKS.md)\n');
  process.exit(process.argv[2] === '--help' ? 0 : 2);
}

main().catch((error) => {
  progress(`failed: ${error.stack ?? error}`);
  process.exit(1);
});
