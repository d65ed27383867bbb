// The results: the Markdown table of every phase that ran, with each target's verdict, printed
// to stdout and written to <results>/<start time>.md beside every sample in the .json.gz.
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';

import { cfg, root } from './config.mjs';
import { progress } from './host.mjs';
import { MiB, mib, ms, ratio } from './stats.mjs';

const verdict = (ok) => (ok ? 'met' : 'MISSED');

export function table(results) {
  const lines = [];
  const m = results.machine;
  lines.push(`Machine: ${m.nproc} x ${m.cpu}, ${m.memory_gib} GiB, ${m.kernel}, Docker ` +
    `${m.docker} (API ${m.api}, ${m.storage}, cgroup v${m.cgroup}), runtimes ${m.runtimes.join(', ')}; ` +
    `image ${results.image_requested} (${m.image}); node ${m.node}.`);
  const phaseLoad = Object.entries(results.phases).filter(([, p]) => p.load)
    .map(([name, p]) => `${name} ${p.load.map((v) => v.toFixed(1)).join('->')}`);
  lines.push(`Load average (1 min): ${results.load.map((v) => v.toFixed(2)).join(' -> ')} ` +
    `(start -> end of the run; ${m.nproc} cores); by phase: ${phaseLoad.join(', ')}.`);
  lines.push(`Runs per contender: ${cfg.runs} measured after ${cfg.warmup} warm-up rounds, ` +
    'in an order shuffled each round; percentiles are nearest-rank.');
  if (cfg.label) {
    lines.push(`Label: ${cfg.label}`);
  }
  lines.push('');

  const lat = [];
  for (const key of ['latency', 'runsc']) {
    const phase = results.phases[key];
    if (!phase || phase.skipped) {
      continue;
    }
    lat.push(phase);
  }
  if (lat.length > 0) {
    lines.push('| settled (the server idle and its pool ready before each run): trivial run `print(1)`, ms | runtime | p50 | p95 | min | max |');
    lines.push('|---|---|---:|---:|---:|---:|');
    const names = {
      mcp: 'server over MCP stdio (SDK client), prepared sandbox',
      fresh: 'the same, `--prepared 0`: a sandbox created per run',
      docker: '`docker run --rm`, same controls',
      floor: 'Engine API floor: create, start, wait, remove',
      prepared: 'Engine API, prepared sandbox (informational)',
      compare: `compared: \`${[path.basename(cfg.compare), ...cfg.compareArgs].join(' ')}\` over MCP`,
    };
    for (const phase of lat) {
      for (const [key, name] of Object.entries(names)) {
        const s = phase[key];
        if (!s) {
          continue;
        }
        lines.push(`| ${name} | ${phase.runtime} | ${ms(s.p50)} | ${ms(s.p95)} | ${ms(s.min)} | ${ms(s.max)} |`);
      }
    }
    lines.push('');
  }

  const ar = results.phases.arrivals;
  if (ar) {
    lines.push(`At clients' arrivals, never waiting for the server (${ar.rounds} rounds each, ` +
      'alternating with `docker run --rm` at the same arrivals), ms per run:');
    lines.push('');
    lines.push('| arrivals, program | MCP p50 | MCP p95 | `docker run` p50 | `docker run` p95 | p50 ratio | p95 ratio |');
    lines.push('|---|---:|---:|---:|---:|---:|---:|');
    for (const [key, p] of Object.entries(ar.patterns)) {
      lines.push(`| ${key} | ${ms(p.mcp.p50)} | ${ms(p.mcp.p95)} | ${ms(p.docker.p50)} | ` +
        `${ms(p.docker.p95)} | ${ratio(p.ratio_p50)} | ${ratio(p.ratio_p95)} |`);
    }
    lines.push('');
    if (ar.capacity) {
      const ladder = ar.capacity.ladder.map((l) => `${l.rate}/s: p95 ${ms(l.p95)}`).join(', ');
      lines.push(`Capacity: ${ar.capacity.held_rate} trivial runs/s held with p95 under twice ` +
        `the idle p50 (${ms(ar.capacity.idle_p50)} ms at one every 2 s; ${ladder}).`);
    }
    if (ar.session) {
      lines.push(`open_session to the first answered print(1): p50 ${ms(ar.session.p50)} ms, ` +
        `p95 ${ms(ar.session.p95)} ms.`);
    }
    lines.push('');
  }

  for (const la of [results.phases.languages, results.phases.runsc_languages].filter(Boolean)) {
    lines.push(`| trivial run by language (${la.runtime}), ms | MCP p50 | MCP p95 | ` +
      '`docker run --rm` p50 | p95 | MCP / docker p50 |');
    lines.push('|---|---:|---:|---:|---:|---:|');
    for (const language of Object.keys(la.programs)) {
      const m = la[`${language}_mcp`];
      const d = la[`${language}_docker`];
      lines.push(`| ${language}: \`${la.programs[language]}\` | ${ms(m.p50)} | ${ms(m.p95)} | ` +
        `${ms(d.p50)} | ${ms(d.p95)} | ${(m.p50 / d.p50).toFixed(2)} |`);
    }
    lines.push('');
  }

  for (const pa of [results.phases.packages, results.phases.runsc_packages].filter(Boolean)) {
    const mib = (bytes) => (bytes / 1024 ** 2).toFixed(0);
    lines.push(`| packages (${pa.runtime}), ms | p50 | p95 | min | max |`);
    lines.push('|---|---:|---:|---:|---:|');
    for (const [key, name] of [
      ['first', `first run of a new set (pygments, chardet, a C extension: ${mib(pa.layer_bytes.medium)} MiB layer), settled server`],
      ['prepare_first', '  of which the set\'s layer (prepare_seconds)'],
      ['pace', 'the same set 2 s after (an agent\'s turn)'],
      ['back_to_back', 'the same set again at once'],
      ['docker_run', '`docker run --rm` of the image with that set'],
      ['first_big', `first run of a new set with a 64 MiB module (${mib(pa.layer_bytes.big)} MiB layer)`],
      ['prepare_first_big', '  of which the set\'s layer (prepare_seconds)'],
      ['docker_run_big', '`docker run --rm` of the image with that set']]) {
      const s = pa[key];
      lines.push(`| ${name} | ${ms(s.p50)} | ${ms(s.p95)} | ${ms(s.min)} | ${ms(s.max)} |`);
    }
    lines.push(`cached set / \`docker run\` p50: ${(pa.pace.p50 / pa.docker_run.p50).toFixed(2)} ` +
      `at an agent's pace, ${(pa.back_to_back.p50 / pa.docker_run.p50).toFixed(2)} back to back; ` +
      `first run / \`docker run\` p50: ${(pa.first.p50 / pa.docker_run.p50).toFixed(1)} ` +
      `(big: ${(pa.first_big.p50 / pa.docker_run_big.p50).toFixed(1)}).`);
    lines.push('');
  }

  for (const eg of [results.phases.egress, results.phases.runsc_egress].filter(Boolean)) {
    const rate = (s) => `${s.p50.toFixed(0)} (${s.min.toFixed(0)})`;
    const added = (value) => `${value >= 0 ? '+' : ''}${value.toFixed(1)} ms`;
    lines.push(`| egress (${eg.runtime}), timed inside the program, ${eg.relay.mib_per_s.n} rounds | ` +
      `server's relay | \`docker run --network bridge\` (${eg.bridge_runtime}) | relay against bridge |`);
    lines.push('|---|---:|---:|---:|');
    lines.push(`| ${eg.big_bytes / 1024 ** 2} MiB download, MiB/s p50 (min) | ` +
      `${rate(eg.relay.mib_per_s)} | ${rate(eg.bridge.mib_per_s)} | ${ratio(eg.throughput_ratio)} |`);
    lines.push(`| a new connection and a GET of ${eg.tiny_bytes} bytes ` +
      `(${eg.connections_per_round} a round), ms p50 | ` +
      `${eg.relay.connect_ms.p50.toFixed(1)} | ${eg.bridge.connect_ms.p50.toFixed(1)} | ` +
      `${added(eg.added_connect_p50_ms)} |`);
    lines.push(`| the same, p95 | ${eg.relay.connect_ms.p95.toFixed(1)} | ` +
      `${eg.bridge.connect_ms.p95.toFixed(1)} | ${added(eg.added_connect_p95_ms)} |`);
    lines.push('');
  }
  for (const cr of [results.phases.credentials, results.phases.runsc_credentials].filter(Boolean)) {
    const added = (value) => `${value >= 0 ? '+' : ''}${value.toFixed(1)} ms`;
    lines.push(`| brokered credentials (${cr.runtime}), timed inside the program, ` +
      `${cr.relay.requests_per_s.n} rounds | brokered (TLS ended at the server, header added) | ` +
      'relayed (TLS end to end) | brokered against relayed |');
    lines.push('|---|---:|---:|---:|');
    lines.push(`| ${cr.requests_per_connection} GETs on one kept-alive connection, requests/s p50 ` +
      `(min) | ${cr.brokered.requests_per_s.p50.toFixed(0)} (${cr.brokered.requests_per_s.min.toFixed(0)}) | ` +
      `${cr.relay.requests_per_s.p50.toFixed(0)} (${cr.relay.requests_per_s.min.toFixed(0)}) | ` +
      `${ratio(cr.rate_ratio)} |`);
    lines.push(`| a new connection and one GET (${cr.connections_per_round} a round), ms p50 | ` +
      `${cr.brokered.connect_ms.p50.toFixed(1)} | ${cr.relay.connect_ms.p50.toFixed(1)} | ` +
      `${added(cr.added_connect_p50_ms)} |`);
    lines.push(`| the same, p95 | ${cr.brokered.connect_ms.p95.toFixed(1)} | ` +
      `${cr.relay.connect_ms.p95.toFixed(1)} | ${added(cr.added_connect_p95_ms)} |`);
    lines.push('');
  }

  if (results.phases.session) {
    const se = results.phases.session;
    lines.push('| one `start_run` with `wait_seconds`, ms | p50 | p95 | min | max |');
    lines.push('|---|---:|---:|---:|---:|');
    for (const [key, name] of [['trivial_session', 'trivial run in a session'],
      ['trivial_fresh', 'trivial run, fresh (prepared) sandbox'],
      ['analysis_session', 'analysis snippet in a session'],
      ['analysis_fresh', 'analysis snippet, fresh (prepared, warm) sandbox']]) {
      const s = se[key];
      lines.push(`| ${name} | ${ms(s.p50)} | ${ms(s.p95)} | ${ms(s.min)} | ${ms(s.max)} |`);
    }
    lines.push('');
  }

  const sn = results.phases.snapshots;
  if (sn && !sn.skipped) {
    lines.push(`| sessions (${sn.runtime}), ms, one round each interleaved | p50 | p95 | min | max |`);
    lines.push('|---|---:|---:|---:|---:|');
    for (const [key, name] of [['wake', 'hibernated session (pandas loaded): its first `start_run`, answered'],
      ['woke', '... of which waking (`session_woke_seconds`)'],
      ['open', '`open_session` and its first answered `print(1)`, no prepared sandbox'],
      ['restart', 'session kept across a restart (`--state-dir`): its first `start_run` on the next server, answered'],
      ['restart_woke', '... of which waking'],
      ['restart_stop', 'stopping the server that keeps it (one session, end of stdin to exit)']]) {
      const s = sn[key];
      if (!s) {
        continue;  // results from before the phase measured restarts
      }
      lines.push(`| ${name} | ${ms(s.p50)} | ${ms(s.p95)} | ${ms(s.min)} | ${ms(s.max)} |`);
    }
    lines.push('');
  }

  for (const [phase, runtime] of [['analysis', 'runc'], ['runsc_analysis', 'runsc']]) {
    const an = results.phases[phase];
    if (!an) {
      continue;
    }
    lines.push(`| settled: analysis snippet (pandas, numpy, matplotlib to a PNG), ${runtime}, ms | p50 | p95 | min | max |`);
    lines.push('|---|---:|---:|---:|---:|');
    for (const [key, name] of [['warm', 'server over MCP, prepared sandbox with a warm interpreter' +
      (runtime === 'runsc' ? ' (`--warm-modules` named)' : '')],
      ['cold', 'the same, `--warm-modules none`' + (runtime === 'runsc' ? ' (the default)' : '')],
      ['docker', '`docker run --rm`, same controls']]) {
      const s = an[key];
      lines.push(`| ${name} | ${ms(s.p50)} | ${ms(s.p95)} | ${ms(s.min)} | ${ms(s.max)} |`);
    }
    lines.push('');
  }
  if (results.phases.burst) {
    const bu = results.phases.burst;
    lines.push(`| burst of trivial runs started at once (${bu.pause_ms} ms between bursts), ms per run | p50 | p95 | min | max |`);
    lines.push('|---|---:|---:|---:|---:|');
    for (const n of bu.sizes) {
      for (const [who, name] of [['mcp', 'server over MCP'], ['docker', '`docker run --rm`']]) {
        const s = bu[`${who}_${n}`];
        lines.push(`| ${n} at once: ${name} | ${ms(s.p50)} | ${ms(s.p95)} | ${ms(s.min)} | ${ms(s.max)} |`);
      }
    }
    lines.push('');
  }

  const targets = [];
  const lr = results.phases.latency;
  if (lr) {
    const r50 = lr.mcp.p50 / lr.docker.p50;
    const r95 = lr.mcp.p95 / lr.docker.p95;
    targets.push(['trivial: MCP p50 / `docker run` p50 (runc)', ratio(r50), '<= 0.12', verdict(r50 <= 0.12)]);
    targets.push(['trivial: MCP p95 / `docker run` p95 (runc)', ratio(r95), '<= 0.25', verdict(r95 <= 0.25)]);
    targets.push(['MCP p50 / Engine API floor p50 (runc)', ratio(lr.mcp.p50 / lr.floor.p50), '-', '-']);
    if (lr.fresh) {
      targets.push(['MCP `--prepared 0` p50 / `docker run` p50 (runc)', ratio(lr.fresh.p50 / lr.docker.p50), '-', '-']);
    }
  }
  if (sn && !sn.skipped) {
    targets.push([`snapshots: waking a hibernated session, p50 (${sn.runtime})`,
      `${ms(sn.woke.p50)} ms`, '<= 1500 ms', verdict(sn.woke.p50 <= 1500)]);
    targets.push([`snapshots: hibernated session's first run answered, p50 (${sn.runtime})`,
      `${ms(sn.wake.p50)} ms`, '-', '-']);
    if (sn.restart) {
      targets.push([`snapshots: a kept session's first run after a restart, waking p50 (${sn.runtime})`,
        `${ms(sn.restart_woke.p50)} ms`, '<= 1500 ms', verdict(sn.restart_woke.p50 <= 1500)]);
    }
  }
  for (const cr of [results.phases.credentials, results.phases.runsc_credentials].filter(Boolean)) {
    targets.push([`credentials: brokered / relayed requests per second p50 (${cr.runtime})`,
      ratio(cr.rate_ratio), '-', '-']);
  }
  for (const eg of [results.phases.egress, results.phases.runsc_egress].filter(Boolean)) {
    targets.push([`egress: relay / bridge download MiB/s p50 (${eg.runtime})`,
      ratio(eg.throughput_ratio), '>= 0.50', verdict(eg.throughput_ratio >= 0.5)]);
    targets.push([`egress: added per connection, p50 (${eg.runtime})`,
      `${eg.added_connect_p50_ms.toFixed(1)} ms`, '< 5 ms', verdict(eg.added_connect_p50_ms < 5)]);
  }
  const an = results.phases.analysis;
  if (an) {
    const r = an.warm.p50 / an.docker.p50;
    targets.push(['analysis: MCP p50 / `docker run` p50 (runc)', ratio(r), '<= 0.15', verdict(r <= 0.15)]);
    targets.push(['analysis: MCP p95 / `docker run` p95 (runc)', ratio(an.warm.p95 / an.docker.p95), '-', '-']);
    targets.push(['analysis: MCP `--warm-modules none` p50 / `docker run` p50', ratio(an.cold.p50 / an.docker.p50), '-', '-']);
    targets.push(['idle prepared sandbox, warm interpreter, MiB (p50)', MiB(an.idle_warm.p50), '-', '-']);
    targets.push(['idle prepared sandbox, `--warm-modules none`, MiB (p50)', MiB(an.idle_cold.p50), '-', '-']);
  }
  const bu = results.phases.burst;
  if (bu) {
    for (const n of bu.sizes) {
      const r = bu[`mcp_${n}`].p50 / bu[`docker_${n}`].p50;
      targets.push([`burst of ${n}: MCP p50 / \`docker run\` p50 (each run, ${n} at once)`, ratio(r),
        n === 4 ? '<= 0.30' : '-', n === 4 ? verdict(r <= 0.3) : '-']);
    }
  }
  const rs = results.phases.runsc;
  if (rs && !rs.skipped) {
    targets.push(['MCP p50 / `docker run` p50 (runsc)', ratio(rs.mcp.p50 / rs.docker.p50), '(<= 0.30)', verdict(rs.mcp.p50 / rs.docker.p50 <= 0.3)]);
    targets.push(['MCP p95 / `docker run` p95 (runsc)', ratio(rs.mcp.p95 / rs.docker.p95), '(<= 0.50)', verdict(rs.mcp.p95 / rs.docker.p95 <= 0.5)]);
  }
  const ra = results.phases.runsc_analysis;
  if (ra) {
    targets.push(['runsc analysis: MCP p50 / `docker run` p50, the default (no warm imports)', ratio(ra.cold.p50 / ra.docker.p50), '<= 0.30', verdict(ra.cold.p50 / ra.docker.p50 <= 0.3)]);
    targets.push(['runsc analysis: the same with `--warm-modules` named', ratio(ra.warm.p50 / ra.docker.p50), '-', '-']);
  }
  const tp = results.phases.throughput;
  if (tp) {
    const r = tp.mcp_rate / tp.docker_rate;
    targets.push([`throughput: server, ${tp.runs} at once, concurrency ${tp.concurrency}`,
      `${tp.mcp_rate.toFixed(2)} runs/s (${tp.mcp_seconds.toFixed(1)} s)`, '', '']);
    targets.push([`throughput: \`docker run --rm\`, ${tp.runs} sequential`,
      `${tp.docker_rate.toFixed(2)} runs/s (${tp.docker_seconds.toFixed(1)} s)`, '', '']);
    targets.push(['throughput ratio', ratio(r), '>= 2', verdict(r >= 2)]);
  }
  const mem = results.phases.memory;
  if (mem) {
    targets.push(['server VmRSS idle, MiB', MiB(mem.idle_rss), '<= 20', verdict(mib(mem.idle_rss) <= 20)]);
    targets.push([`server peak RSS (VmHWM), ${mem.flood_runs} runs x ${MiB(mem.flood_bytes_each)} MiB output, MiB`,
      MiB(mem.flood_peak_rss), '<= 64', verdict(mib(mem.flood_peak_rss) <= 64)]);
  }
  const sk = results.phases.soak;
  if (sk) {
    targets.push([`soak: ${sk.runs} runs (${sk.failures} failed), containers left`,
      `${sk.left_while_serving} while serving, ${sk.left_after_exit} after exit`, '0',
      verdict(sk.left_while_serving === 0 && sk.left_after_exit === 0)]);
    targets.push(['soak: VmRSS growth, MiB', `${MiB(sk.growth)} (${MiB(sk.baseline_rss)} -> ${MiB(sk.end_rss)})`,
      '<= 5', verdict(mib(sk.growth) <= 5)]);
  }
  const te = results.phases.tenants;
  if (te) {
    const all = (who) => Object.entries(te.statuses[who]).map(([s, n]) => `${n} ${s}`).join(', ');
    targets.push([`tenants: ${te.runs} runs, alice / mallory`, `${all('alice')} / ${all('mallory')}`,
      '', '']);
    targets.push([`tenants: alice's print(1) p50 / p95 beside mallory, ${te.idle_connections} ` +
      `idle connections, ${te.long_polls} long-polls (${te.polls.refused} refused)`,
      `${ms(te.alice_p50)} / ${ms(te.alice_p95)} ms`, '', '']);
    targets.push(['tenants: VmRSS half way -> end, MiB',
      `${MiB(te.half_rss)} -> ${MiB(te.end_rss)} (from ${MiB(te.baseline_rss)})`, 'growth <= 5',
      verdict(mib(te.end_rss - te.half_rss) <= 5)]);
  }
  if (targets.length > 0) {
    lines.push('| measure | value | target | verdict |');
    lines.push('|---|---|---|---|');
    for (const row of targets) {
      lines.push(`| ${row.join(' | ')} |`);
    }
    lines.push('');
  }

  for (const phase of lat) {
    if (Object.keys(phase.steps).length === 0) {
      continue;
    }
    lines.push(`Where a server run's time goes (${phase.runtime}, docker plugin debug timings, ms; ` +
      'for the prepared server, create to start happen in the pool, off the run\'s path):');
    lines.push('');
    const columns = [['prepared', phase.steps], ['`--prepared 0`', phase.fresh_steps ?? {}]];
    if (phase.compare_steps) {
      columns.push(['compared', phase.compare_steps]);
    }
    lines.push(`| step | ${columns.map(([label]) => `${label} p50 | ${label} p95`).join(' | ')} |`);
    lines.push(`|---|${columns.map(() => '---:|---:').join('|')}|`);
    const stepNames = [...new Set(columns.flatMap(([, steps]) => Object.keys(steps)))];
    const cell = (s) => (s ? `${s.p50.toFixed(1)} | ${s.p95.toFixed(1)}` : '- | -');
    for (const name of stepNames) {
      lines.push(`| ${name} | ${columns.map(([, steps]) => cell(steps[name])).join(' | ')} |`);
    }
    lines.push('');
  }
  return lines.join('\n');
}

// Prints the table and writes the .md and every sample as .json.gz (compressed: the samples
// are evidence to keep, not text to read in the tree), named by the run's start time.
export function writeResults(results) {
  const text = table(results);
  process.stdout.write(`${text}\n`);
  fs.mkdirSync(cfg.resultsDir, { recursive: true });
  const stamp = results.started.replace(/:/g, '').replace(/\..*/, '');
  const base = path.join(cfg.resultsDir, stamp);
  fs.writeFileSync(`${base}.md`, `# Benchmark ${results.started}\n\n${text}\n`);
  fs.writeFileSync(`${base}.json.gz`,
                   zlib.gzipSync(`${JSON.stringify(results, null, 1)}\n`, { level: 9 }));
  progress(`wrote ${path.relative(root, base)}.md and .json.gz`);
}
