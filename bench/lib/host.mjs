// The host the benchmark runs on: progress lines on stderr, a process's memory from /proc, the
// docker CLI (the sandboxes servers and raw contenders leave), and the machine's description.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';

import { BENCH_LABEL, cfg } from './config.mjs';

const t0 = Date.now();
export function progress(message) {
  const seconds = ((Date.now() - t0) / 1000).toFixed(0).padStart(4);
  const load = os.loadavg()[0].toFixed(2);
  process.stderr.write(`[bench ${seconds}s load ${load}] ${message}\n`);
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export function procStatus(pid) {
  const text = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const field = (name) => {
    const match = text.match(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm'));
    return match ? Number(match[1]) * 1024 : NaN;
  };
  return { rss: field('VmRSS'), hwm: field('VmHWM'), threads: Number(text.match(/^Threads:\s+(\d+)/m)?.[1]) };
}

export function sh(command, args) {
  return execFileSync(command, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })
    .trim();
}

// Sandboxes of one server process (other servers may share the engine), or of any.
export function managedContainers(pid) {
  const label = pid === undefined ? 'io.scs.managed' : `io.scs.owner-pid=${pid}`;
  const out = sh('docker', ['ps', '-aq', '--filter', 'label=io.scs.managed', '--filter',
    `label=${label}`]);
  return out === '' ? [] : out.split('\n');
}

// A server's sandboxes other than its idle prepared ones: what its finished runs left.
export function leftContainers(pid) {
  const idle = new Set(sh('docker', ['ps', '-q', '--filter', `label=io.scs.owner-pid=${pid}`,
    '--filter', 'label=io.scs.prepared=true', '--filter', 'status=running']).split('\n'));
  return managedContainers(pid).filter((id) => !idle.has(id));
}

export function removeBenchLeftovers() {
  const out = sh('docker', ['ps', '-aq', '--filter', `label=${BENCH_LABEL}`]);
  if (out !== '') {
    sh('docker', ['rm', '-f', ...out.split('\n')]);
  }
}

export function machineInfo() {
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
