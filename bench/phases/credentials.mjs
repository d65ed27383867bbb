// Phase `credentials` (issue 48): what brokering a credential costs an HTTPS client. The bench
// serves HTTPS from this process, under a certificate a CA it makes signs, for two names the
// server's --egress-resolve pins to 127.0.0.1:
// - `relay`: plain.test, an allowed host without a credential: the program's TLS goes end to end
//   through the relay (issue 44), the program trusting the bench's CA;
// - `brokered`: broker.test, the same server with --egress-credential: the server ends the
//   program's TLS with its own CA (which the sandbox trusts through SSL_CERT_FILE), verifies the
//   host against the bench's CA (--egress-upstream-ca) and sets the header on every request.
// One Python program per contender, timed inside itself with the standard library's
// http.client through the proxy: BENCH_CREDENTIAL_REQUESTS requests on one kept-alive
// connection (requests per second), then BENCH_CREDENTIAL_CONNECTIONS new connections of one
// request each (ms per connection: proxy CONNECT, both TLS handshakes, request, answer). Run in
// one server, interleaved round by round. The host counts the requests that carried the
// credential; the phase fails unless every brokered request did and no relayed one did.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';

import { cfg } from '../lib/config.mjs';
import { progress } from '../lib/host.mjs';
import { Server } from '../lib/server.mjs';
import { settle } from '../lib/settle.mjs';
import { roundOrder, summary } from '../lib/stats.mjs';

const SECRET = `Bearer bench-${process.pid}-not-a-real-token`;

function program(host, port, cafile) {
  return [
    'import http.client, json, os, ssl, time',
    `HOST, PORT = ${JSON.stringify(host)}, ${port}`,
    `CAFILE = ${cafile === null ? "os.environ['SSL_CERT_FILE']" : JSON.stringify(cafile)}`,
    `N, M = ${cfg.credentialRequests}, ${cfg.credentialConnections}`,
    'context = ssl.create_default_context(cafile=CAFILE)',
    'def connection():',
    "    c = http.client.HTTPSConnection('127.0.0.1', 3128, context=context, timeout=60)",
    '    c.set_tunnel(HOST, PORT)',
    '    return c',
    'def get(c):',
    "    c.request('GET', '/tiny')",
    '    r = c.getresponse()',
    '    assert r.status == 200 and r.read() == b"ok", r.status',
    'c = connection()',
    'get(c)',  // the first request builds the tunnel and both handshakes: not in the rate
    'started = time.perf_counter()',
    'for _ in range(N):',
    '    get(c)',
    'rate = N / (time.perf_counter() - started)',
    'c.close()',
    'connections = []',
    'for _ in range(M):',
    '    started = time.perf_counter()',
    '    c = connection()',
    '    get(c)',
    '    c.close()',
    '    connections.append((time.perf_counter() - started) * 1000)',
    'print(json.dumps({"requests_per_s": rate, "connect_ms": connections}))',
    'print("ok")',
  ].join('\n');
}

function makeCertificates(directory) {
  const run = (args) => execFileSync('openssl', args, { cwd: directory, stdio: 'pipe' });
  run(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.pem',
    '-days', '2', '-subj', '/CN=scs-bench-ca']);
  run(['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'host.key', '-out', 'host.csr',
    '-subj', '/CN=plain.test']);
  fs.writeFileSync(path.join(directory, 'ext'), 'subjectAltName=DNS:plain.test,DNS:broker.test');
  run(['x509', '-req', '-in', 'host.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial',
    '-out', 'host.pem', '-days', '2', '-extfile', 'ext']);
  fs.writeFileSync(path.join(directory, 'secret'), `${SECRET}\n`, { mode: 0o600 });
}

function figures(stdout, who) {
  const line = stdout.split('\n').find((l) => l.startsWith('{'));
  if (!line) {
    throw new Error(`credentials: the ${who} contender printed no figures: ` +
      JSON.stringify(stdout));
  }
  return JSON.parse(line);
}

export async function credentials(runtime) {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'scs-bench-credentials-'));
  makeCertificates(directory);
  const counted = { with: 0, without: 0 };
  const host = https.createServer({ key: fs.readFileSync(path.join(directory, 'host.key')),
    cert: fs.readFileSync(path.join(directory, 'host.pem')), keepAliveTimeout: 60_000 },
  (request, response) => {
    counted[request.headers.authorization === SECRET ? 'with' : 'without'] += 1;
    response.writeHead(200, { 'Content-Length': 2 });
    response.end('ok');
  });
  const port = await new Promise((resolve, reject) => {
    host.once('error', reject);
    host.listen(0, '127.0.0.1', () => resolve(host.address().port));
  });
  progress(`credentials (${runtime}): HTTPS on 127.0.0.1:${port}; starting the server`);
  let server;
  try {
    server = await Server.start(runtime, { extraArgs: [
      '--egress-allow', `local=plain.test:${port}`, '--egress-allow', `local=broker.test:${port}`,
      '--egress-resolve', 'plain.test=127.0.0.1', '--egress-resolve', 'broker.test=127.0.0.1',
      '--egress-credential',
      `local=broker.test:${port}:Authorization=file:${path.join(directory, 'secret')}`,
      '--egress-upstream-ca', path.join(directory, 'ca.pem')] });
  } catch (error) {
    host.close();
    throw error;
  }
  const ca = fs.readFileSync(path.join(directory, 'ca.pem'), 'utf8');
  const codes = { relay: program('plain.test', port, 'ca.pem'),
    brokered: program('broker.test', port, null) };
  const names = ['relay', 'brokered'];
  const samples = Object.fromEntries(names.map((name) => [name,
    { requests_per_s: [], connect_ms: [] }]));
  const run = async (name) => {
    const before = { ...counted };
    const report = await server.run(codes[name],
      { files: [{ path: 'ca.pem', content: ca }] });
    if (report.status !== 'succeeded' || !report.stdout.endsWith('ok\n')) {
      throw new Error(`credentials: a ${name} run did not succeed: ${report.status} ` +
        `${report.reason} stderr=${JSON.stringify(report.stderr?.slice(-600))}`);
    }
    const requests = 1 + cfg.credentialRequests + cfg.credentialConnections;
    const carried = name === 'brokered' ? counted.with - before.with
      : counted.without - before.without;
    if (carried !== requests || (name === 'relay' && counted.with !== before.with)) {
      throw new Error(`credentials: the host counted ${carried} of ${requests} ${name} requests ` +
        `as expected (${JSON.stringify(counted)})`);
    }
    return figures(report.stdout, name);
  };
  const load = [os.loadavg()[0]];
  const warmup = 1;
  const rounds = warmup + cfg.credentialRuns;
  try {
    for (let round = 0; round < rounds; ++round) {
      for (const name of roundOrder(names, round)) {
        await settle([server]);
        const out = await run(name);
        if (round >= warmup) {
          samples[name].requests_per_s.push(out.requests_per_s);
          samples[name].connect_ms.push(...out.connect_ms);
        }
      }
      progress(`credentials (${runtime}): round ${round + 1}/${rounds}`);
    }
  } finally {
    await server.close();
    host.closeAllConnections?.();
    host.close();
    fs.rmSync(directory, { recursive: true, force: true });
  }
  load.push(os.loadavg()[0]);
  const summaries = Object.fromEntries(names.map((name) => [name, {
    requests_per_s: summary(samples[name].requests_per_s),
    connect_ms: summary(samples[name].connect_ms),
  }]));
  const { relay, brokered } = summaries;
  return {
    runtime,
    program: codes.brokered,
    requests_per_connection: cfg.credentialRequests,
    connections_per_round: cfg.credentialConnections,
    ...summaries,
    rate_ratio: brokered.requests_per_s.p50 / relay.requests_per_s.p50,
    added_connect_p50_ms: brokered.connect_ms.p50 - relay.connect_ms.p50,
    added_connect_p95_ms: brokered.connect_ms.p95 - relay.connect_ms.p95,
    host_counted: counted,
    samples,
    load,
    server_errors: [...server.errors],
  };
}
