// The benchmark's settings, read once from the BENCH_* environment variables (see
// docs/BENCHMARKS.md), and what it runs: the trivial run, the analysis snippet, and the controls
// of the server's default sandbox that the raw contenders copy.
import path from 'node:path';
import { fileURLToPath } from 'node:url';

// bench/ and the repository's root.
const here = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const root = path.resolve(here, '..');

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
export const cfg = {
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
    'arrivals,latency,languages,packages,egress,credentials,analysis,burst,session,snapshots,' +
    'runsc,' +
    'throughput,memory,soak,tenants')
    .split(','),
  analysisRuns: envInt('BENCH_ANALYSIS_RUNS', quick ? 5 : 20),
  // Measured rounds of the languages phase (six contenders a round), after 2 discarded.
  languageRuns: envInt('BENCH_LANGUAGE_RUNS', quick ? 5 : 20),
  // Measured rounds of the packages phase (two new sets a round), after 1 discarded.
  packageRuns: envInt('BENCH_PACKAGE_RUNS', quick ? 3 : 10),
  // Measured rounds of the egress phase (a 64 MiB download and new connections, through the
  // server's relay and over Docker's bridge), after 1 discarded; the connections each round.
  egressRuns: envInt('BENCH_EGRESS_RUNS', quick ? 2 : 5),
  egressConnections: envInt('BENCH_EGRESS_CONNECTIONS', 20),
  // Measured rounds of the credentials phase (end-to-end TLS through the relay against a brokered
  // host), after 1 discarded; requests on one connection, then new connections, each round.
  credentialRuns: envInt('BENCH_CREDENTIAL_RUNS', quick ? 2 : 5),
  // Measured rounds of the snapshots phase (a wake and an open_session each), after 1 discarded.
  snapshotRuns: envInt('BENCH_SNAPSHOT_RUNS', quick ? 3 : 8),
  credentialRequests: envInt('BENCH_CREDENTIAL_REQUESTS', 200),
  credentialConnections: envInt('BENCH_CREDENTIAL_CONNECTIONS', 20),
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

export const TRIVIAL = 'print(1)';
// What agents run: the scientific stack imported, a small DataFrame described and plotted to
// a PNG under out/ (which the server returns as an image; docker run just writes it).
export const ANALYSIS = [
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
export const BENCH_LABEL = 'io.scs.bench';

// What the server's sandbox gets by default (5 GB, 2 cpus, 256 processes, 600 s): the same
// controls, spelled as `docker run` flags and as an Engine API create body.
export const sandbox = {
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
