// Phase `session`: a run in a session against a run in a fresh prepared sandbox, for the trivial
// run and the analysis snippet, each answered in one start_run call.
import os from 'node:os';

import { ANALYSIS, TRIVIAL, cfg } from '../lib/config.mjs';
import { engine } from '../lib/engine.mjs';
import { progress } from '../lib/host.mjs';
import { Server, expectAnalysis, expectTrivial } from '../lib/server.mjs';
import { settle } from '../lib/settle.mjs';
import { roundOrder, summary } from '../lib/stats.mjs';

// A session against fresh runs, interleaved on one server: the trivial run and the analysis
// snippet, each in the session (its interpreter has everything imported after the first run)
// and in a fresh prepared sandbox, every run answered in one start_run call (wait_seconds).
export async function session() {
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
