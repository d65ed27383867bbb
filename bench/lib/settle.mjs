// Waiting between timed runs until every server under test is settled: no sandbox left but its
// prepared ones, all running and idle by their cgroup's CPU time.
import fs from 'node:fs';

import { engine } from './engine.mjs';
import { progress, sleep } from './host.mjs';

// Waits until each of these servers has no sandbox left but its prepared ones, all of them
// ready and idle (a server removes a run's sandbox after its report and then prepares a new one,
// whose interpreter then imports the warm modules), so that no contender pays for another's
// clean-up or preparation. At most 10 s, and 5 s for the idling.
export async function settle(servers) {
  const filters = encodeURIComponent(JSON.stringify({ label: ['io.scs.managed'] }));
  // A session's sandbox stays between runs by design: only the pool's are waited for.
  const ours = (c, server) => c.Labels?.['io.scs.owner-pid'] === String(server.pid) &&
    !c.Labels?.['io.scs.run-id']?.startsWith('session-');
  const settled = (listed, server) => {
    const own = listed.filter((c) => ours(c, server));
    // At least its --prepared: the pool may keep more after runs arrived together.
    return own.length >= server.prepared &&
      own.every((c) => c.Labels?.['io.scs.prepared'] === 'true' && c.State === 'running');
  };
  for (const deadline = Date.now() + 10_000; Date.now() < deadline;) {
    const listed = await engine('GET', `/containers/json?all=1&filters=${filters}`);
    if (servers.every((server) => settled(listed, server))) {
      // A sandbox the engine reports running may be a few ms from the server's pool, and its
      // interpreter may still be importing the warm modules: wait until it idles.
      await sleep(20);
      const ids = listed.filter((c) => servers.some((server) => ours(c, server))).map((c) => c.Id);
      await quiet(ids);
      // The last run is reported before its sandbox ends (the early report): one that looked
      // like an idle prepared sandbox may have been that run's, ending now. Settled only if
      // the same sandboxes are still there and still running.
      const again = await engine('GET', `/containers/json?all=1&filters=${filters}`);
      const still = again.filter((c) => servers.some((server) => ours(c, server)));
      if (still.length === ids.length && still.every((c) => ids.includes(c.Id)) &&
          servers.every((server) => settled(again, server))) {
        return;
      }
      continue;
    }
    await sleep(5);
  }
  progress('warning: a server\'s sandboxes had not settled 10 s after its run');
}

// CPU time a container has used, in ns, from its cgroup (v1 or v2); null when unreadable.
function cpuNanos(id) {
  try {
    return Number(fs.readFileSync(`/sys/fs/cgroup/cpuacct/docker/${id}/cpuacct.usage`, 'utf8'));
  } catch {
    try {
      const stat = fs.readFileSync(`/sys/fs/cgroup/system.slice/docker-${id}.scope/cpu.stat`, 'utf8');
      return Number(/usage_usec (\d+)/.exec(stat)[1]) * 1000;
    } catch {
      return null;
    }
  }
}

// Waits, up to 5 s, until the containers use less than 2 ms of CPU in 50 ms: idle.
export async function quiet(ids) {
  for (const deadline = Date.now() + 5000; Date.now() < deadline;) {
    const before = ids.map(cpuNanos);
    await sleep(50);
    const after = ids.map(cpuNanos);
    if (after.every((value, i) => value === null || before[i] === null ||
        value - before[i] < 2e6)) {
      return;
    }
  }
  progress('warning: a prepared sandbox was still busy 5 s after it started');
}
