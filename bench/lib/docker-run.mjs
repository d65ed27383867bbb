// The `docker run --rm` contender: the server's default sandbox controls spelled as CLI flags,
// timed from spawning the CLI to its exit.
import { spawn } from 'node:child_process';

import { BENCH_LABEL, TRIVIAL, cfg, sandbox } from './config.mjs';

// `interpreter`: the argv that runs `code` given as its last argument. `image` and `env` (more
// variables) for another image than the benchmark's; `network` for the egress phase's contender,
// which reaches the host over Docker's bridge.
function dockerRunArgs(runtime, code, interpreter, { image = cfg.image, env = [],
  network = 'none' } = {}) {
  const args = ['run', '--rm', '--label', `${BENCH_LABEL}=1`, '--runtime', runtime,
    '--network', network, '--read-only', '--cap-drop', 'ALL',
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
  for (const variable of [...sandbox.env, ...env]) {
    args.push('--env', variable);
  }
  args.push(image, ...interpreter, code);
  return args;
}

// `code` must print "1" (the trivial run) or end its output with "ok".
const PYTHON = ['/usr/bin/python3', '-I', '-c'];

export async function dockerRun(runtime, code = TRIVIAL, interpreter = PYTHON, options = {}) {
  return (await dockerRunOutput(runtime, code, interpreter, options)).ms;
}

// The same, with the program's stdout: for a program that measures itself and prints what it
// measured before its "ok".
export function dockerRunOutput(runtime, code = TRIVIAL, interpreter = PYTHON, options = {}) {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn('docker', dockerRunArgs(runtime, code, interpreter, options),
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
        resolve({ ms, stdout: out });
      }
    });
  });
}
