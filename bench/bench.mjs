// The benchmark behind `bench/run` (see docs/BENCHMARKS.md). Progress goes to stderr; the
// final table goes to stdout and to bench/results/<date>.md, every sample to <date>.json.gz.
//
// This entry point reads the configuration (lib/config.mjs), pins the image, runs the phases in
// their fixed order (phases/, arrivals.mjs, tenants.mjs) and writes the results (lib/report.mjs).
// The server over the SDK client is lib/server.mjs; the raw contenders are lib/docker-run.mjs and
// lib/engine.mjs; lib/settle.mjs waits between timed runs until every server's pool is idle.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { arrivals } from './arrivals.mjs';
import { ANALYSIS, TRIVIAL, cfg, root } from './lib/config.mjs';
import { dockerRun } from './lib/docker-run.mjs';
import { setApiVersion, setSeccompText } from './lib/engine.mjs';
import { machineInfo, managedContainers, procStatus, progress, removeBenchLeftovers, sh }
  from './lib/host.mjs';
import { writeResults } from './lib/report.mjs';
import { Server } from './lib/server.mjs';
import { percentile, summary } from './lib/stats.mjs';
import { analysis } from './phases/analysis.mjs';
import { burst } from './phases/burst.mjs';
import { credentials } from './phases/credentials.mjs';
import { egress } from './phases/egress.mjs';
import { languages } from './phases/languages.mjs';
import { latency } from './phases/latency.mjs';
import { memory, soak, throughput } from './phases/load.mjs';
import { packages } from './phases/packages.mjs';
import { session } from './phases/session.mjs';
import { snapshots } from './phases/snapshots.mjs';
import { tenantSoak } from './tenants.mjs';

const results = { config: { ...cfg, seccomp: path.relative(root, cfg.seccomp) }, machine: {},
  phases: {} };

async function main() {
  progress(`config: ${JSON.stringify({ ...cfg, server: undefined })}`);
  if (!fs.existsSync(cfg.server)) {
    throw new Error(`no server binary at ${cfg.server}`);
  }
  setSeccompText(fs.readFileSync(cfg.seccomp, 'utf8'));
  // Pinned for the whole run: a rebuild of the tag meanwhile must not mix two images.
  const imageId = sh('docker', ['image', 'inspect', '-f', '{{.Id}}', cfg.image]);
  results.image_requested = cfg.image;
  cfg.image = `scs-bench:${imageId.replace('sha256:', '').slice(0, 12)}`;
  sh('docker', ['tag', imageId, cfg.image]);
  const version = JSON.parse(sh('docker', ['version', '--format', '{{json .Server}}']));
  setApiVersion(version.ApiVersion);
  results.machine = machineInfo();
  results.load = [os.loadavg()[0]];
  results.started = new Date().toISOString();
  removeBenchLeftovers();
  const before = managedContainers();
  if (before.length > 0) {
    progress(`warning: ${before.length} io.scs.managed containers exist before the run`);
  }
  results.managed_before = before.length;

  const want = (name) => cfg.phases.includes(name);
  try {
    if (want('arrivals')) {
      results.phases.arrivals = await arrivals(cfg, { Server, dockerRun, progress, summary,
        codes: { trivial: TRIVIAL, analysis: ANALYSIS } });
    }
    if (want('latency')) {
      results.phases.latency = await latency('runc');
    }
    if (want('languages')) {
      results.phases.languages = await languages('runc');
      if (cfg.runsc !== '0' && (results.machine.runtimes.includes('runsc') || cfg.runsc === '1')) {
        results.phases.runsc_languages = await languages('runsc');
      }
    }
    if (want('packages')) {
      results.phases.packages = await packages('runc');
      if (cfg.runsc !== '0' && (results.machine.runtimes.includes('runsc') || cfg.runsc === '1')) {
        results.phases.runsc_packages = await packages('runsc');
      }
    }
    if (want('egress')) {
      results.phases.egress = await egress('runc');
      if (cfg.runsc !== '0' && (results.machine.runtimes.includes('runsc') || cfg.runsc === '1')) {
        results.phases.runsc_egress = await egress('runsc');
      }
    }
    if (want('credentials')) {
      results.phases.credentials = await credentials('runc');
      if (cfg.runsc !== '0' && (results.machine.runtimes.includes('runsc') || cfg.runsc === '1')) {
        results.phases.runsc_credentials = await credentials('runsc');
      }
    }
    if (want('analysis')) {
      results.phases.analysis = await analysis();
    }
    if (want('burst')) {
      results.phases.burst = await burst();
    }
    if (want('session')) {
      results.phases.session = await session();
    }
    if (want('snapshots')) {
      const registered = results.machine.runtimes.includes('runsc');
      results.phases.snapshots = cfg.runsc === '0' || (!registered && cfg.runsc !== '1')
        ? { skipped: registered ? 'BENCH_RUNSC=0' : 'runsc is not registered' }
        : await snapshots('runsc');
    }
    if (want('runsc')) {
      const registered = results.machine.runtimes.includes('runsc');
      if (cfg.runsc === '0' || (!registered && cfg.runsc !== '1')) {
        results.phases.runsc = { skipped: registered ? 'BENCH_RUNSC=0' : 'runsc is not registered' };
      } else {
        results.phases.runsc = await latency('runsc');
        results.phases.runsc_analysis = await analysis('runsc');
      }
    }
    if (want('throughput')) {
      results.phases.throughput = await throughput();
    }
    if (want('memory')) {
      results.phases.memory = await memory();
    }
    if (want('soak') && cfg.soak > 0) {
      progress(`soak: ${cfg.soak} runs, ${cfg.concurrency} at a time`);
      results.phases.soak = await soak();
    }
    if (want('tenants') && cfg.tenantSoak > 0) {
      progress(`tenants: ${cfg.tenantSoak} runs of two tenants, one hostile`);
      results.phases.tenants = await tenantSoak(cfg, { progress, procStatus, percentile });
    }
  } finally {
    // Never masks the error that ended the run.
    try {
      removeBenchLeftovers();
      sh('docker', ['rmi', '--no-prune', cfg.image]);
    } catch (error) {
      progress(`clean-up failed (bench containers, tag ${cfg.image}): ${error.message.trim()}`);
    }
  }
  results.load.push(os.loadavg()[0]);
  results.finished = new Date().toISOString();

  writeResults(results);
}

if (process.argv.length > 2) {
  process.stderr.write('usage: node bench/bench.mjs (no arguments; settings are BENCH_* ' +
    'environment variables, see docs/BENCHMARKS.md)\n');
  process.exit(process.argv[2] === '--help' ? 0 : 2);
}

main().catch((error) => {
  progress(`failed: ${error.stack ?? error}`);
  process.exit(1);
});
