// Phase `languages`: the trivial run in each language the server runs (issue 28), over MCP
// with the prepared pool (a bash or JavaScript run takes the same prepared sandbox as Python's:
// its launcher ends the warm Python and starts the language's interpreter), against
// `docker run --rm` of the same program by the same interpreter with the server's controls,
// interleaved round by round. As in the latency phase, each contender starts once the server
// has settled (its prepared sandbox idle), so this compares a prepared sandbox's answer with
// a container's whole life, not the pool's refill under back-to-back arrivals.
import os from 'node:os';

import { cfg } from '../lib/config.mjs';
import { dockerRun } from '../lib/docker-run.mjs';
import { progress } from '../lib/host.mjs';
import { Server, expectTrivial } from '../lib/server.mjs';
import { settle } from '../lib/settle.mjs';
import { roundOrder, summary } from '../lib/stats.mjs';

// Each prints "1\n": the program over MCP, and the argv `docker run` gives it to.
const PROGRAMS = {
  python: { code: 'print(1)', interpreter: ['/usr/bin/python3', '-I', '-c'] },
  bash: { code: 'echo 1', interpreter: ['/usr/bin/bash', '-c'] },
  javascript: { code: 'console.log(1)', interpreter: ['/usr/bin/node', '-e'] },
};

export async function languages(runtime) {
  progress(`languages (${runtime}): starting the server`);
  const server = await Server.start(runtime);
  const contenders = {};
  for (const [language, { code, interpreter }] of Object.entries(PROGRAMS)) {
    contenders[`${language}_mcp`] = async () => {
      const started = performance.now();
      expectTrivial(await server.run(code, { language }));
      return performance.now() - started;
    };
    contenders[`${language}_docker`] = () => dockerRun(runtime, code, interpreter);
  }
  const names = Object.keys(contenders);
  const samples = Object.fromEntries(names.map((name) => [name, []]));
  const load = [os.loadavg()[0]];
  const warmup = 2;
  const rounds = warmup + cfg.languageRuns;
  try {
    for (let round = 0; round < rounds; ++round) {
      for (const name of roundOrder(names, round)) {
        await settle([server]);
        const ms = await contenders[name]();
        if (round >= warmup) {
          samples[name].push(ms);
        }
      }
      if ((round + 1) % 10 === 0) {
        progress(`languages (${runtime}): round ${round + 1}/${rounds}`);
      }
    }
  } finally {
    await server.close();
  }
  load.push(os.loadavg()[0]);
  return {
    runtime,
    programs: Object.fromEntries(Object.entries(PROGRAMS).map(([l, p]) => [l, p.code])),
    ...Object.fromEntries(names.map((name) => [name, summary(samples[name])])),
    samples,
    load,
    server_errors: [...server.errors],
  };
}
