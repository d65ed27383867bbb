// The Engine API over the socket, one connection per call as the docker plugin does, and the two
// raw contenders built on it: the floor (create, wait, start, remove) and a sandbox prepared
// ahead of need with the server's launcher idling on stdin.
import http from 'node:http';

import { BENCH_LABEL, TRIVIAL, cfg, sandbox } from './config.mjs';

let apiVersion = '1.41';

// The engine's API version, read from `docker version` once the run begins.
export function setApiVersion(version) {
  apiVersion = version;
}

export function engine(method, target, body) {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const headers = { Host: 'docker' };
    if (payload !== undefined) {
      headers['Content-Type'] = 'application/json';
      headers['Content-Length'] = Buffer.byteLength(payload);
    }
    const request = http.request({ socketPath: cfg.socket, method, path: `/v${apiVersion}${target}`,
      headers, agent: false }, (response) => {
      const chunks = [];
      response.on('data', (chunk) => chunks.push(chunk));
      response.on('end', () => {
        const text = Buffer.concat(chunks).toString();
        if (response.statusCode >= 300) {
          reject(new Error(`${method} ${target}: HTTP ${response.statusCode} ${text.trim()}`));
        } else {
          resolve(text === '' ? null : JSON.parse(text));
        }
      });
      response.on('error', reject);
    });
    request.on('error', reject);
    request.end(payload);
  });
}

// Opens a streamed reply (wait) and resolves once the headers arrived, with a promise for the
// parsed body: the wait is registered before the container starts.
function engineStream(method, target) {
  return new Promise((resolve, reject) => {
    const request = http.request({ socketPath: cfg.socket, method, path: `/v${apiVersion}${target}`,
      headers: { Host: 'docker', 'Content-Length': 0 }, agent: false }, (response) => {
      const body = new Promise((resolveBody, rejectBody) => {
        const chunks = [];
        response.on('data', (chunk) => chunks.push(chunk));
        response.on('end', () => {
          const text = Buffer.concat(chunks).toString();
          response.statusCode >= 300 ? rejectBody(new Error(`${target}: ${text}`))
            : resolveBody(JSON.parse(text));
        });
        response.on('error', rejectBody);
      });
      resolve({ body });
    });
    request.on('error', reject);
    request.end();
  });
}

// POST /attach with `Upgrade: tcp`: the raw hijacked socket.
function engineAttach(id) {
  return new Promise((resolve, reject) => {
    const request = http.request({ socketPath: cfg.socket, method: 'POST',
      path: `/v${apiVersion}/containers/${id}/attach?stream=1&stdin=1&stdout=1&stderr=1`,
      headers: { Host: 'docker', Connection: 'Upgrade', Upgrade: 'tcp', 'Content-Length': 0 },
      agent: false });
    request.on('upgrade', (response, socket, head) => resolve({ socket, head }));
    request.on('response', (response) => reject(new Error(`attach: HTTP ${response.statusCode}`)));
    request.on('error', reject);
    request.end();
  });
}

// `init`: Docker's own init as PID 1 (the launcher is PID 1 itself and asks for none).
function createBody(runtime, command, stdin, init = true) {
  return {
    Image: cfg.image,
    Cmd: command,
    Entrypoint: [],
    User: sandbox.user,
    Env: sandbox.env,
    WorkingDir: '/workspace',
    Hostname: 'sandbox',
    Labels: { [BENCH_LABEL]: '1' },
    NetworkDisabled: true,
    AttachStdin: stdin,
    OpenStdin: stdin,
    StdinOnce: stdin,
    AttachStdout: stdin,
    AttachStderr: stdin,
    StopTimeout: 1,
    HostConfig: {
      Runtime: runtime,
      NetworkMode: 'none',
      ReadonlyRootfs: true,
      CapDrop: ['ALL'],
      SecurityOpt: ['no-new-privileges:true', `seccomp=${seccompText}`],
      Init: init,
      Memory: sandbox.memory,
      MemorySwap: sandbox.memory,
      NanoCpus: sandbox.nanoCpus,
      PidsLimit: sandbox.pids,
      Ulimits: sandbox.ulimits,
      ShmSize: sandbox.shm,
      OomScoreAdj: sandbox.oomScoreAdj,
      Tmpfs: sandbox.tmpfs,
      LogConfig: { Type: 'none', Config: {} },
      CgroupnsMode: 'private',
      IpcMode: 'private',
    },
  };
}

let seccompText = '';

// The seccomp profile's text, read from BENCH_SECCOMP once the run begins.
export function setSeccompText(text) {
  seccompText = text;
}

export async function engineFloor(runtime) {
  const started = performance.now();
  const created = await engine('POST', '/containers/create', createBody(runtime,
    ['/usr/bin/python3', '-I', '-c', TRIVIAL], false));
  const waiting = await engineStream('POST', `/containers/${created.Id}/wait?condition=next-exit`);
  await engine('POST', `/containers/${created.Id}/start`);
  const exit = await waiting.body;
  await engine('DELETE', `/containers/${created.Id}?force=1&v=1`);
  const ms = performance.now() - started;
  if (exit.StatusCode !== 0) {
    throw new Error(`the floor's container exited ${exit.StatusCode}`);
  }
  return ms;
}

// A ustar archive holding main.py, owned by the sandbox user, as the core builds it.
function ustar(name, content) {
  const data = Buffer.from(content);
  const header = Buffer.alloc(512);
  const put = (offset, length, text) => header.write(text, offset, length, 'ascii');
  const octal = (value, length) => value.toString(8).padStart(length - 1, '0') + '\0';
  put(0, 100, name);
  put(100, 8, octal(0o644, 8));
  put(108, 8, octal(10001, 8));
  put(116, 8, octal(10001, 8));
  put(124, 12, octal(data.length, 12));
  put(136, 12, octal(0, 12));
  put(148, 8, '        ');
  put(156, 1, '0');
  put(257, 6, 'ustar\0');
  put(263, 2, '00');
  let sum = 0;
  for (const byte of header) {
    sum += byte;
  }
  put(148, 8, sum.toString(8).padStart(6, '0') + '\0 ');
  const padding = Buffer.alloc((512 - (data.length % 512)) % 512);
  return Buffer.concat([header, data, padding, Buffer.alloc(1024)]);
}

export class PreparedSandbox {
  // Created, attached, wait registered and started: the launcher idles on stdin.
  static async make(runtime) {
    const created = await engine('POST', '/containers/create', createBody(runtime,
      ['/usr/bin/python3', '-I', '/opt/scs/launcher.py', '--deadline', '610'], true, false));
    const prepared = new PreparedSandbox(created.Id);
    const { socket, head } = await engineAttach(created.Id);
    prepared.socket = socket;
    prepared.output = [head];
    prepared.ended = new Promise((resolve) => {
      socket.on('data', (chunk) => prepared.output.push(chunk));
      socket.on('end', resolve);
      socket.on('close', resolve);
      socket.on('error', resolve);
    });
    prepared.waiting = await engineStream('POST', `/containers/${created.Id}/wait?condition=next-exit`);
    await engine('POST', `/containers/${created.Id}/start`);
    return prepared;
  }

  constructor(id) {
    this.id = id;
  }

  // Timed: code in, output to its end, exit record.
  async use() {
    const started = performance.now();
    this.socket.end(archive);
    await this.ended;
    const exit = await this.waiting.body;
    const ms = performance.now() - started;
    const stdout = demuxStdout(Buffer.concat(this.output));
    if (exit.StatusCode !== 0 || stdout !== '1\n') {
      throw new Error(`the prepared sandbox exited ${exit.StatusCode} with ${JSON.stringify(stdout)}`);
    }
    return ms;
  }

  async remove() {
    this.socket.destroy();
    await engine('DELETE', `/containers/${this.id}?force=1&v=1`);
  }
}

const archive = ustar('main.py', `${TRIVIAL}\n`);

function demuxStdout(stream) {
  let out = '';
  for (let at = 0; at + 8 <= stream.length;) {
    const size = stream.readUInt32BE(at + 4);
    if (stream[at] === 1) {
      out += stream.subarray(at + 8, at + 8 + size).toString();
    }
    at += 8 + size;
  }
  return out;
}
