// Phases `analysis` and (under runsc) `runsc_analysis`: the analysis snippet through a server
// with a warm interpreter, one without, and `docker run --rm`, interleaved.
import os from 'node:os';

import { ANALYSIS, cfg } from '../lib/config.mjs';
import { dockerRun } from '../lib/docker-run.mjs';
import { engine } from '../lib/engine.mjs';
import { progress } from '../lib/host.mjs';
import { Server, expectAnalysis } from '../lib/server.mjs';
import { settle } from '../lib/settle.mjs';
import { ms, percentile, roundOrder, summary } from '../lib/stats.mjs';

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
export async function analysis(runtime = 'runc') {
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
