// Phase `burst`: trivial runs fanned out 4 and 8 at once, against as many `docker run --rm` at
// once, with a pause between bursts for the server's pool to follow.
import os from 'node:os';

import { TRIVIAL, cfg } from '../lib/config.mjs';
import { dockerRun } from '../lib/docker-run.mjs';
import { progress, sleep } from '../lib/host.mjs';
import { Server, expectTrivial } from '../lib/server.mjs';
import { settle } from '../lib/settle.mjs';
import { ms, percentile, summary } from '../lib/stats.mjs';

// Bursts of trivial runs started at once (an agent fanning out), against as many `docker run
// --rm` at once; every run's own time from its start to its final report. Bursts of 4 and 8
// alternate, with a pause between bursts.
export async function burst() {
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
