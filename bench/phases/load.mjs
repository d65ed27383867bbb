// Phases `throughput`, `memory` and `soak`: the server under sustained load. Runs queued at once
// against sequential `docker run --rm`, the server's resident memory while runs flood their
// output, and many runs in a row with the memory and the containers left counted.
import os from 'node:os';

import { TRIVIAL, cfg } from '../lib/config.mjs';
import { dockerRun } from '../lib/docker-run.mjs';
import { leftContainers, managedContainers, procStatus, progress, sleep } from '../lib/host.mjs';
import { Server, expectTrivial } from '../lib/server.mjs';
import { mib } from '../lib/stats.mjs';

// 200 runs submitted at once against the same 200 run one after another with docker run;
// the docker runs are split around the server's batch (ABA) so a drift in load hits both.
export async function throughput() {
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

export async function memory() {
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

export async function soak() {
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
