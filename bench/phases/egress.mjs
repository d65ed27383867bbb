// Phase `egress` (issue 44): what the server's egress relay costs a program that downloads.
// The bench serves a 64 MiB file and a tiny one over plain HTTP from this process, and one
// Python program, timed inside itself, fetches the big file once (MiB/s) and then the tiny one
// BENCH_EGRESS_CONNECTIONS times, each on a new connection (ms per connection: connect, request,
// answer, close). Two contenders run it, interleaved round by round:
// - `relay`: a run through the server started with `--egress-allow local=bench.test:PORT
//   --egress-resolve bench.test=127.0.0.1`. The sandbox has no network interface: urllib finds
//   the relay's proxy at 127.0.0.1:3128 through HTTP_PROXY, the bytes cross the sandbox's frame
//   channel, and the server dials 127.0.0.1:PORT on the host. Each report's `network` part must
//   name the host with at least the file's bytes received, or the phase fails.
// - `bridge`: `docker run --rm --network bridge` of the same image with the server's controls,
//   the same program fetching from the bridge's gateway address directly (no proxy variables):
//   what a user gets who gives a container the network instead.
// Timing inside the program leaves out what differs between the two for another reason (a
// prepared sandbox against a container's start), so the ratio is the relay's alone. The goal:
// at least half the bridge's throughput, under 5 ms added per connection.
import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import http from 'node:http';
import os from 'node:os';

import { cfg } from '../lib/config.mjs';
import { dockerRunOutput } from '../lib/docker-run.mjs';
import { progress, sh } from '../lib/host.mjs';
import { Server } from '../lib/server.mjs';
import { settle } from '../lib/settle.mjs';
import { roundOrder, summary } from '../lib/stats.mjs';

const BIG_BYTES = 64 * 1024 ** 2;
const TINY_BYTES = 100;
const HOST = 'bench.test';  // the name the relay contender asks for; --egress-resolve pins it

// The program both contenders run, fetching from `base`. One untimed fetch of the tiny file
// first: urllib builds its opener (and reads the proxy variables) on the first call, which is
// not the relay's cost. Prints its figures as one JSON line, then "ok".
function program(base) {
  return [
    'import json, time, urllib.request',
    `BASE = ${JSON.stringify(base)}`,
    `SIZE = ${BIG_BYTES}`,
    `N = ${cfg.egressConnections}`,
    'def fetch(path):',
    '    got = 0',
    '    with urllib.request.urlopen(BASE + path, timeout=120) as response:',
    '        while chunk := response.read(1 << 20):',
    '            got += len(chunk)',
    '    return got',
    'fetch("/tiny")',
    'started = time.perf_counter()',
    'got = fetch("/big")',
    'seconds = time.perf_counter() - started',
    'assert got == SIZE, got',
    'connections = []',
    'for _ in range(N):',
    '    started = time.perf_counter()',
    '    fetch("/tiny")',
    '    connections.append((time.perf_counter() - started) * 1000)',
    'print(json.dumps({"mib_per_s": SIZE / 2**20 / seconds, "connect_ms": connections}))',
    'print("ok")',
  ].join('\n');
}

// The address containers on Docker's default bridge reach the host by. Docker 20.10 leaves the
// gateway out of the default bridge's IPAM record and puts it on the bridge's interface only.
function bridgeGateway() {
  const network = JSON.parse(sh('docker', ['network', 'inspect', 'bridge', '-f', '{{json .}}']));
  const gateway = network.IPAM?.Config?.find((c) => c.Gateway)?.Gateway;
  if (gateway) {
    return gateway;
  }
  const name = network.Options?.['com.docker.network.bridge.name'] ?? 'docker0';
  const out = execFileSync('ip', ['-4', '-o', 'addr', 'show', 'dev', name], { encoding: 'utf8' });
  const match = out.match(/inet (\d+\.\d+\.\d+\.\d+)\//);
  if (!match) {
    throw new Error(`no IPv4 address on the bridge's interface ${name}`);
  }
  return match[1];
}

const listen = (server, port, address) => new Promise((resolve, reject) => {
  server.once('error', reject);
  server.listen(port, address, () => {
    server.off('error', reject);
    resolve(server.address().port);
  });
});

// The file server: on loopback (where the server's relay dials) and on the bridge's gateway
// (where the bridge contender connects), one port for both, which the kernel picks for loopback.
// Not on 0.0.0.0: nothing else on the network needs it. Counts what it served, as a check that
// each contender fetched from it.
async function fileServer(gateway) {
  const big = crypto.randomBytes(BIG_BYTES);
  const tiny = Buffer.alloc(TINY_BYTES, 'x');
  const served = { big: 0, tiny: 0 };
  const handler = (request, response) => {
    const body = request.url === '/big' ? big : request.url === '/tiny' ? tiny : null;
    if (body === null) {
      response.writeHead(404).end();
      return;
    }
    served[request.url.slice(1)] += 1;
    response.writeHead(200, { 'Content-Type': 'application/octet-stream',
      'Content-Length': body.length });
    response.end(body);
  };
  for (let attempt = 0; ; ++attempt) {
    const servers = [http.createServer(handler), http.createServer(handler)];
    const port = await listen(servers[0], 0, '127.0.0.1');
    try {
      await listen(servers[1], port, gateway);
    } catch (error) {
      servers[0].close();
      if (error.code === 'EADDRINUSE' && attempt < 5) {
        continue;  // the port is free on loopback only: another pick
      }
      throw error;
    }
    const close = () => Promise.all(servers.map((s) => new Promise((resolve) => {
      s.closeAllConnections?.();
      s.close(resolve);
    })));
    return { port, served, close };
  }
}

// The figures a contender's program printed before its "ok".
function figures(stdout, who) {
  const line = stdout.split('\n').find((l) => l.startsWith('{'));
  if (!line) {
    throw new Error(`egress: the ${who} contender printed no figures: ${JSON.stringify(stdout)}`);
  }
  return JSON.parse(line);
}

export async function egress(runtime) {
  const gateway = bridgeGateway();
  const files = await fileServer(gateway);
  const target = `${HOST}:${files.port}`;
  progress(`egress (${runtime}): serving ${BIG_BYTES / 1024 ** 2} MiB on 127.0.0.1 and ` +
    `${gateway}, port ${files.port}; starting the server`);
  let server;
  try {
    server = await Server.start(runtime, { extraArgs: ['--egress-allow', `local=${target}`,
      '--egress-resolve', `${HOST}=127.0.0.1`] });
  } catch (error) {
    await files.close();
    throw error;
  }
  const codes = { relay: program(`http://${target}`),
    bridge: program(`http://${gateway}:${files.port}`) };
  const names = ['relay', 'bridge'];
  // This host registers runsc with --network=none (scripts/setup.sh), so no runsc container
  // has a bridge: under runsc the baseline is runc's bridge, what a peer's sandbox would get.
  const bridgeRuntime = runtime === 'runsc' ? 'runc' : runtime;
  const samples = Object.fromEntries(names.map((name) => [name,
    { mib_per_s: [], connect_ms: [], wall_ms: [] }]));
  const network = [];  // each kept relay round's report part
  const contenders = {
    relay: async () => {
      const started = performance.now();
      const report = await server.run(codes.relay);
      const wall = performance.now() - started;
      if (report.status !== 'succeeded' || !report.stdout.endsWith('ok\n')) {
        throw new Error(`egress: a relay run did not succeed: ${report.status} ${report.reason} ` +
          `stderr=${JSON.stringify(report.stderr?.slice(-600))}`);
      }
      // The report must say where the bytes came from: the relay, not some other way out.
      const reached = report.network?.reached?.find((h) => h.host === target);
      if (!reached || reached.bytes_received < BIG_BYTES) {
        throw new Error(`egress: the report's network part does not show ${BIG_BYTES} bytes ` +
          `from ${target}: ${JSON.stringify(report.network)}`);
      }
      return { wall, out: figures(report.stdout, 'relay'), network: report.network };
    },
    bridge: async () => {
      const { ms, stdout } = await dockerRunOutput(bridgeRuntime, codes.bridge, undefined,
        { network: 'bridge' });
      return { wall: ms, out: figures(stdout, 'bridge') };
    },
  };
  const load = [os.loadavg()[0]];
  const warmup = 1;
  const rounds = warmup + cfg.egressRuns;
  try {
    for (let round = 0; round < rounds; ++round) {
      for (const name of roundOrder(names, round)) {
        await settle([server]);
        const result = await contenders[name]();
        if (round >= warmup) {
          samples[name].mib_per_s.push(result.out.mib_per_s);
          samples[name].connect_ms.push(...result.out.connect_ms);
          samples[name].wall_ms.push(result.wall);
          if (result.network) {
            network.push(result.network);
          }
        }
      }
      progress(`egress (${runtime}): round ${round + 1}/${rounds}`);
    }
  } finally {
    await server.close();
    await files.close();
  }
  load.push(os.loadavg()[0]);
  const summaries = Object.fromEntries(names.map((name) => [name, {
    mib_per_s: summary(samples[name].mib_per_s),
    connect_ms: summary(samples[name].connect_ms),
    wall_ms: summary(samples[name].wall_ms),
  }]));
  const { relay, bridge } = summaries;
  return {
    runtime,
    program: codes.relay,
    big_bytes: BIG_BYTES,
    tiny_bytes: TINY_BYTES,
    connections_per_round: cfg.egressConnections,
    gateway,
    bridge_runtime: bridgeRuntime,
    served: files.served,
    ...summaries,
    throughput_ratio: relay.mib_per_s.p50 / bridge.mib_per_s.p50,
    added_connect_p50_ms: relay.connect_ms.p50 - bridge.connect_ms.p50,
    added_connect_p95_ms: relay.connect_ms.p95 - bridge.connect_ms.p95,
    network,
    samples,
    load,
    server_errors: [...server.errors],
  };
}
