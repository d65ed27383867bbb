// Phases `latency` and `runsc`: one trivial run (`print(1)`) by every contender, interleaved in
// one process so that load drifts hit all of them alike:
//   mcp       the server over stdio with the official MCP SDK client: start_run, then
//             get_result with wait_seconds until the report is final; the run takes the
//             server's prepared sandbox (--prepared, BENCH_PREPARED)
//   fresh     the same server binary with --prepared 0: every run creates its sandbox
//   docker    `docker run --rm` with the server's controls as flags, `python3 -I -c`
//   floor     the Engine API alone: create, wait (registered), start, wait body, remove
//   prepared  the Engine API with a sandbox created and started ahead of need (the launcher
//             idles on stdin): write the code, read the output to its end and the exit
//             record. Informational: the floor for any server that keeps prepared sandboxes.
//   compare   a second server binary over MCP (BENCH_COMPARE), when one is named
import os from 'node:os';

import { TRIVIAL, cfg } from '../lib/config.mjs';
import { dockerRun } from '../lib/docker-run.mjs';
import { PreparedSandbox, engineFloor } from '../lib/engine.mjs';
import { procStatus, progress } from '../lib/host.mjs';
import { Server, expectTrivial } from '../lib/server.mjs';
import { quiet, settle } from '../lib/settle.mjs';
import { ms, percentile, roundOrder, summary } from '../lib/stats.mjs';

// Every contender once a round, in an order shuffled each round (roundOrder).
export async function latency(runtime) {
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
