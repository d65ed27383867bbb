// Phase `arrivals` of bench/bench.mjs: runs at the pace clients send them, never waiting for the
// server to get ready between timed runs (issue 25). Each pattern plays against one server that
// has served one run and no more, then against `docker run --rm` with the same controls, at the
// same arrivals, alternating in rounds so that a drift in load falls on both:
//
//   back-to-back   the next run starts when the last one's report is in (closed loop)
//   every-300ms    one run every 300 ms, whether or not the last has ended (open loop)
//   every-2s       one run every 2 s
//   poisson-1/s    Poisson arrivals at 1 run/s, BENCH_POISSON_SECONDS per round
//   poisson-2/s    the same at 2 runs/s
//   burst4-think2s four at once, then 2 s after the last of them ended (an agent's turn)
//   burst4-every1s four at once every second, open loop
//
// for the trivial run, and the analysis snippet at the paces in ANALYSIS_PATTERNS
// (BENCH_ARRIVAL_CODES). Each sample is one run's
// own time from its start_run (or the CLI's start) to its final report (or the CLI's exit).
// Then: the server's capacity (the highest rate of a ladder of Poisson rates at which its p95
// stays under twice its every-2s p50), and open_session to the first answered print(1).
// BENCH_ARRIVAL_PATTERNS names the parts to play (the patterns, `capacity`, `session`); all by
// default.

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// The analysis snippet takes `docker run` seconds of both cores: at faster arrivals its runs
// pile up without end, so it plays only the patterns an agent's analysis steps follow.
const ANALYSIS_PATTERNS = ['back-to-back', 'every-2s', 'poisson-1/s', 'burst4-think2s'];

// A seeded exponential gap (mulberry32), so that every run of the benchmark sends the same
// arrivals.
function poissonGaps(rate, seconds, seed) {
  let state = seed >>> 0;
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
  const gaps = [];
  for (let total = 0; total < seconds * 1000;) {
    const gap = -Math.log(1 - next()) / rate * 1000;
    gaps.push(gap);
    total += gap;
  }
  return gaps;
}

// Starts `one()` at the given gaps (ms before each start) without waiting for the earlier ones;
// resolves with every sample once all have ended.
async function openLoop(gaps, one) {
  const pending = [];
  for (const gap of gaps) {
    await sleep(gap);
    pending.push(one());
  }
  return Promise.all(pending);
}

// Each pattern: how one round sends `one()`, and how many samples a round gives.
function patterns(cfg) {
  const every = (ms, count) => (one) => openLoop(Array.from({ length: count }, (_, i) =>
    (i === 0 ? 0 : ms)), one);
  const bursts = (count, thinkMs) => async (one) => {
    const samples = [];
    for (let i = 0; i < count; ++i) {
      samples.push(...await Promise.all([one(), one(), one(), one()]));
      await sleep(thinkMs);
    }
    return samples;
  };
  const burstsEvery = (count, periodMs) => async (one) => {
    const rounds = [];
    for (let i = 0; i < count; ++i) {
      rounds.push(Promise.all([one(), one(), one(), one()]));
      await sleep(periodMs);
    }
    return (await Promise.all(rounds)).flat();
  };
  return [
    ['back-to-back', async (one) => {
      const samples = [];
      for (let i = 0; i < cfg.arrivalRuns; ++i) {
        samples.push(await one());
      }
      return samples;
    }],
    ['every-300ms', every(300, cfg.arrivalRuns)],
    ['every-2s', every(2000, Math.max(4, cfg.arrivalRuns / 2))],
    ['poisson-1/s', (one) => openLoop(poissonGaps(1, cfg.poissonSeconds, 1), one)],
    ['poisson-2/s', (one) => openLoop(poissonGaps(2, cfg.poissonSeconds, 2), one)],
    ['burst4-think2s', bursts(Math.max(2, cfg.arrivalRuns / 4), 2000)],
    ['burst4-every1s', burstsEvery(Math.max(2, cfg.arrivalRuns / 4), 1000)],
  ];
}

export async function arrivals(cfg, { Server, dockerRun, progress, summary, codes }) {
  const results = { rounds: cfg.arrivalRounds, patterns: {} };
  for (const [codeName, code] of Object.entries(codes).filter(([name]) =>
    cfg.arrivalCodes.includes(name))) {
    for (const [name, play] of patterns(cfg).filter(([name]) => cfg.arrivalParts(name) &&
      (codeName === 'trivial' || ANALYSIS_PATTERNS.includes(name)))) {
      const key = `${name} ${codeName}`;
      const server = await Server.start('runc', { logLevel: 'info' });
      const samples = { mcp: [], docker: [] };
      try {
        await server.run(code);  // its first run: the one the pool was made for
        const one = {
          mcp: async () => {
            const started = performance.now();
            const report = await server.run(code);
            if (report.status !== 'succeeded') {
              throw new Error(`${key}: ${report.status} ${report.reason}`);
            }
            return performance.now() - started;
          },
          docker: () => dockerRun('runc', code),
        };
        for (let round = 0; round < cfg.arrivalRounds; ++round) {
          for (const who of round % 2 === 0 ? ['mcp', 'docker'] : ['docker', 'mcp']) {
            samples[who].push(...await play(one[who]));
          }
        }
      } finally {
        await server.close();
      }
      const mcp = summary(samples.mcp);
      const docker = summary(samples.docker);
      results.patterns[key] = { mcp, docker, ratio_p50: mcp.p50 / docker.p50,
        ratio_p95: mcp.p95 / docker.p95, samples };
      progress(`arrivals ${key}: MCP p50 ${mcp.p50.toFixed(0)} ms, docker run ` +
        `${docker.p50.toFixed(0)} ms (${(mcp.p50 / docker.p50).toFixed(2)})`);
    }
  }
  if (cfg.arrivalParts('capacity')) {
    results.capacity = await capacity(cfg, { Server, progress, summary, codes });
  }
  if (cfg.arrivalParts('session')) {
    results.session = await sessionStart(cfg, { Server, summary });
    progress(`arrivals session: open_session to the first print(1) p50 ` +
      `${results.session.p50.toFixed(0)} ms`);
  }
  return results;
}

// The highest Poisson rate of a ladder at which the server's trivial-run p95 stays under twice
// its p50 at one run every 2 s.
async function capacity(cfg, { Server, progress, summary, codes }) {
  const server = await Server.start('runc', { logLevel: 'info' });
  const timed = async () => {
    const started = performance.now();
    await server.run(codes.trivial);
    return performance.now() - started;
  };
  try {
    await server.run(codes.trivial);
    const idle = summary(await openLoop(Array.from({ length: 10 }, (_, i) => (i ? 2000 : 0)),
      timed));
    const ladder = [];
    let held = 0;
    for (const rate of [1, 2, 4, 8, 16]) {
      const at = summary(await openLoop(poissonGaps(rate, cfg.poissonSeconds, rate), timed));
      ladder.push({ rate, p50: at.p50, p95: at.p95 });
      progress(`capacity: ${rate} runs/s, p95 ${at.p95.toFixed(0)} ms (idle p50 ` +
        `${idle.p50.toFixed(0)} ms)`);
      if (at.p95 >= 2 * idle.p50) {
        break;
      }
      held = rate;
      await sleep(2000);
    }
    return { idle_p50: idle.p50, held_rate: held, ladder };
  } finally {
    await server.close();
  }
}

// open_session to the first answered print(1), each from a server that has opened one before.
async function sessionStart(cfg, { Server, summary }) {
  const server = await Server.start('runc', { logLevel: 'info' });
  const samples = [];
  try {
    for (let i = 0; i <= cfg.arrivalRuns / 2; ++i) {
      const started = performance.now();
      const session = await server.call('open_session', {});
      const report = await server.call('start_run', { code: 'print(1)',
        session_id: session.session_id, wait_seconds: 30 });
      const ms = performance.now() - started;
      await server.call('close_session', { session_id: session.session_id });
      if (report.status !== 'succeeded') {
        throw new Error(`session run: ${report.status} ${report.reason}`);
      }
      if (i > 0) {
        samples.push(ms);
      }
      await sleep(500);
    }
  } finally {
    await server.close();
  }
  return summary(samples);
}
