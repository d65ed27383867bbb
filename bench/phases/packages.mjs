// Phase `packages` (issue 29): runs that ask for packages, from a wheelhouse of real code (the
// host's pygments and chardet, as Debian installed them) and a C extension, all written by
// tests/support/make_wheels.py, plus a set with a 64 MiB module (the size of a compiled library
// such as polars'). Each round asks for a set no earlier round did (a tiny padN project makes it
// new), as an agent does when it first needs a package:
// - `first`: the set's first run, once the server has settled (the start of an interaction):
//   pip, the layer and its image, then a sandbox of it;
// - `pace`: the same set 2 s after the first run ended (an agent's turn), when the set's own
//   prepared sandbox may be ready;
// - `back_to_back`: the same set again at once;
// - `docker_run`: `docker run --rm` of the very image the server made for the set, the
//   packages found through PYTHONPATH, with the server's controls: what a user with an image of
//   those packages would type.
// The big set has `first_big` and `docker_run_big` only. Every contender's program imports
// what its set brings and prints 1.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { cfg, root } from '../lib/config.mjs';
import { dockerRun } from '../lib/docker-run.mjs';
import { progress, sh, sleep } from '../lib/host.mjs';
import { Server, expectTrivial } from '../lib/server.mjs';
import { settle } from '../lib/settle.mjs';
import { summary } from '../lib/stats.mjs';

const PACKAGES_DIRECTORY = '/usr/local/lib/scs-packages';  // launcher_protocol.h
const MEDIUM_CODE = 'import pygments.lexers, chardet, cext\nprint(cext.add(0, 1))';
const BIG_CODE = 'import bigpkg\nprint(1)';

// The derived image whose io.scs.packages label lists exactly `installed`.
function imageOf(installed) {
  const wanted = installed.join(' ');
  const lines = sh('docker', ['images', '--filter', 'label=io.scs.package-set', '--format',
    '{{.Repository}}:{{.Tag}} {{.ID}}']).split('\n').filter(Boolean);
  for (const line of lines) {
    const [name] = line.split(' ');
    const labels = JSON.parse(sh('docker', ['image', 'inspect', '-f', '{{json .Config.Labels}}',
      name]));
    if (labels['io.scs.packages'] === wanted) {
      return name;
    }
  }
  throw new Error(`no derived image holds ${wanted}`);
}

export async function packages(runtime) {
  const rounds = 1 + cfg.packageRuns;  // the first discarded
  const wheelhouse = fs.mkdtempSync(path.join(os.tmpdir(), 'scs-bench-wheels-'));
  sh('/usr/bin/python3', ['-I', path.join(root, 'tests/support/make_wheels.py'), wheelhouse,
    '--native', '--host', 'pygments', 'chardet', '--big', '64', '--pads', String(rounds)]);
  progress(`packages (${runtime}): starting the server with a wheelhouse`);
  const server = await Server.start(runtime, { extraArgs: ['--wheelhouse', wheelhouse,
    '--package-layers', String(2 * rounds + 2)] });
  const names = ['first', 'pace', 'back_to_back', 'docker_run', 'first_big', 'docker_run_big'];
  const samples = Object.fromEntries(names.map((name) => [name, []]));
  const prepare = { first: [], first_big: [] };  // the reports' prepare_seconds, in ms
  const installedBytes = {};
  const load = [os.loadavg()[0]];
  const timed = async (run) => {
    const started = performance.now();
    const report = await run();
    return [performance.now() - started, report];
  };
  const viaMcp = (code, set) => async () => {
    const report = await server.run(code, { packages: set });
    expectTrivial(report);
    return report;
  };
  try {
    for (let round = 0; round < rounds; ++round) {
      const keep = round > 0;
      const pad = `pad${round + 1}`;
      const record = (name, ms) => keep && samples[name].push(ms);
      const medium = ['pygments', 'chardet', 'cext', pad];
      await settle([server]);
      const [first, report] = await timed(viaMcp(MEDIUM_CODE, medium));
      if (!report.packages?.built) {
        throw new Error(`round ${round}: the first run of a new set was not built: ` +
          JSON.stringify(report.packages));
      }
      record('first', first);
      if (keep) {
        prepare.first.push(report.packages.prepare_seconds * 1000);
      }
      await sleep(2000);
      record('pace', (await timed(viaMcp(MEDIUM_CODE, medium)))[0]);
      record('back_to_back', (await timed(viaMcp(MEDIUM_CODE, medium)))[0]);
      const image = imageOf(report.packages.installed);
      record('docker_run', await dockerRun(runtime, MEDIUM_CODE, ['/usr/bin/python3', '-c'],
        { image, env: [`PYTHONPATH=${PACKAGES_DIRECTORY}`] }));

      const big = ['bigpkg', pad];
      await settle([server]);
      const [firstBig, bigReport] = await timed(viaMcp(BIG_CODE, big));
      record('first_big', firstBig);
      if (keep) {
        prepare.first_big.push(bigReport.packages.prepare_seconds * 1000);
      }
      const bigImage = imageOf(bigReport.packages.installed);
      record('docker_run_big', await dockerRun(runtime, BIG_CODE, ['/usr/bin/python3', '-c'],
        { image: bigImage, env: [`PYTHONPATH=${PACKAGES_DIRECTORY}`] }));
      if (round === 0) {
        for (const [label, name] of [['medium', image], ['big', bigImage]]) {
          installedBytes[label] = Number(sh('docker', ['image', 'inspect', '-f', '{{.Size}}',
            name])) - Number(sh('docker', ['image', 'inspect', '-f', '{{.Size}}', cfg.image]));
        }
      }
      progress(`packages (${runtime}): round ${round + 1}/${rounds}`);
    }
  } finally {
    await server.close();
    fs.rmSync(wheelhouse, { recursive: true, force: true });
    const leftover = sh('docker', ['images', '-q', '--filter', 'label=io.scs.package-set']);
    if (leftover !== '') {
      sh('docker', ['rmi', '-f', ...new Set(leftover.split('\n'))]);
    }
  }
  load.push(os.loadavg()[0]);
  return {
    runtime,
    programs: { medium: MEDIUM_CODE, big: BIG_CODE },
    layer_bytes: installedBytes,
    ...Object.fromEntries(names.map((name) => [name, summary(samples[name])])),
    prepare_first: summary(prepare.first),
    prepare_first_big: summary(prepare.first_big),
    samples,
    load,
    server_errors: [...server.errors],
  };
}
