// Phase `snapshots` (runsc only, issue 46): a hibernated session's first run against
// open_session to its first answered run, interleaved on one server. Each round opens a session,
// loads pandas and a frame in it, waits until its idle time has hibernated it (its container
// stopped, the next one created), then times the run that wakes it; the other contender opens
// a session and times open_session to its first answered print(1). No prepared sandbox, so both
// start from nothing ready. The third (--state-dir) loads the same session in a server of its
// own, stops that server (which hibernates the session for the next), starts another with the
// same directory and times the session's first run there.
import fs from 'node:fs';
import os from 'node:os';

import { cfg } from '../lib/config.mjs';
import { engine } from '../lib/engine.mjs';
import { progress } from '../lib/host.mjs';
import { Server } from '../lib/server.mjs';
import { roundOrder, summary } from '../lib/stats.mjs';

const LOAD = 'import pandas as pd\ndf = pd.DataFrame({"a": range(100_000)})\nprint(len(df))';
const IDLE_SECONDS = 2;

// The state of the session's one container ("created" while it sleeps, "running" awake).
async function sessionState(sessionId) {
  const filter = encodeURIComponent(JSON.stringify({ label: [`io.scs.run-id=session-${sessionId}`] }));
  const listed = await engine('GET', `/containers/json?all=1&filters=${filter}`);
  return listed.length === 1 ? listed[0].State : `${listed.length} containers`;
}

export async function snapshots(runtime = 'runsc') {
  progress(`snapshots (${runtime}): starting the server`);
  const server = await Server.start(runtime, {
    prepared: 0, extraArgs: ['--session-idle-seconds', String(IDLE_SECONDS)] });
  const inSession = async (id, code) => server.final(await server.call('start_run',
    { code, session_id: id, wait_seconds: 30 }));
  const contenders = {
    async wake() {
      const { session_id: id } = await server.call('open_session', {});
      const loaded = await inSession(id, LOAD);
      if (loaded.status !== 'succeeded') {
        throw new Error(`snapshots: loading failed: ${JSON.stringify(loaded)}`);
      }
      const deadline = Date.now() + 60_000;
      while (await sessionState(id) !== 'created') {
        if (Date.now() > deadline) {
          throw new Error(`snapshots: session ${id} did not hibernate: ${await sessionState(id)}`);
        }
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      const t = performance.now();
      const report = await inSession(id, 'print(len(df))');
      const ms = performance.now() - t;
      if (report.status !== 'succeeded' || report.stdout !== '100000\n' ||
          !(report.session_woke_seconds > 0)) {
        throw new Error(`snapshots: the wake failed: ${JSON.stringify(report)}`);
      }
      await server.call('close_session', { session_id: id });
      return { ms, woke_ms: report.session_woke_seconds * 1000 };
    },
    async open() {
      const t = performance.now();
      const { session_id: id } = await server.call('open_session', {});
      const report = await inSession(id, 'print(1)');
      const ms = performance.now() - t;
      if (report.status !== 'succeeded' || report.stdout !== '1\n') {
        throw new Error(`snapshots: the first run failed: ${JSON.stringify(report)}`);
      }
      await server.call('close_session', { session_id: id });
      return { ms };
    },
  };
  contenders.restart = async () => {
    const directory = fs.mkdtempSync('/tmp/scs-bench-state-');
    const args = { prepared: 0, extraArgs: ['--state-dir', directory] };
    try {
      const before = await Server.start(runtime, args);
      const { session_id: id } = await before.call('open_session', {});
      const loaded = await before.final(await before.call('start_run',
        { code: LOAD, session_id: id, wait_seconds: 30 }));
      if (loaded.status !== 'succeeded') {
        throw new Error(`snapshots: loading failed: ${JSON.stringify(loaded)}`);
      }
      const stopping = performance.now();
      await before.close();  // end of stdin: the server keeps the session and exits
      const stop_ms = performance.now() - stopping;
      const after = await Server.start(runtime, args);
      try {
        const t = performance.now();
        const answered = await after.final(await after.call('start_run',
          { code: 'print(len(df))', session_id: id, wait_seconds: 30 }));
        const ms = performance.now() - t;
        if (answered.status !== 'succeeded' || answered.stdout !== '100000\n' ||
            !(answered.session_woke_seconds > 0)) {
          throw new Error(`snapshots: the session kept across a restart did not wake: ${JSON.stringify(answered)}`);
        }
        await after.call('close_session', { session_id: id });
        return { ms, woke_ms: answered.session_woke_seconds * 1000, stop_ms };
      } finally {
        await after.close();
      }
    } finally {
      fs.rmSync(directory, { recursive: true, force: true });
    }
  };
  const names = Object.keys(contenders);
  const samples = { wake: [], woke: [], open: [], restart: [], restart_woke: [], restart_stop: [] };
  const load = [os.loadavg()[0]];
  try {
    for (let round = 0; round < 1 + cfg.snapshotRuns; ++round) {
      for (const name of roundOrder(names, round)) {
        const got = await contenders[name]();
        if (round >= 1) {  // the first round warms the image's pages
          samples[name].push(got.ms);
          if (name === 'wake') {
            samples.woke.push(got.woke_ms);
          } else if (name === 'restart') {
            samples.restart_woke.push(got.woke_ms);
            samples.restart_stop.push(got.stop_ms);
          }
        }
      }
    }
  } finally {
    await server.close();
  }
  load.push(os.loadavg()[0]);
  return {
    runtime,
    wake: summary(samples.wake),
    woke: summary(samples.woke),
    open: summary(samples.open),
    restart: summary(samples.restart),
    restart_woke: summary(samples.restart_woke),
    restart_stop: summary(samples.restart_stop),
    samples,
    load,
    server_errors: [...server.errors],
  };
}
