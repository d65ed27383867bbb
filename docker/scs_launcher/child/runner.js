'use strict';
// A JavaScript run's or session's interpreter (Node.js), as PID 1 starts it (languages.py):
// `node runner.js run REPORT_FD` runs /workspace/main.js once; `node runner.js session` runs each
// run's main.js when PID 1 writes "RUN RESULT_CAP\n" on fd 3 and answers on fd 4, as
// child/session.py does. The code runs as a script in the one global context, as Node's REPL
// runs its input: globals (var, function, and top-level let and const) carry over between a
// session's runs; require, module, exports, __filename and __dirname are main.js's. The value
// of the last expression, awaited when it is a Promise, is the run's result (util.inspect, cut
// to its cap); an uncaught exception is printed as Node prints it and reported as
// {type, message, traceback}. In a session process.exit() ends only the run, with its code, and
// SIGINT (PID 1's interrupt) ends the code in progress, not the process.

const {AsyncLocalStorage} = require('async_hooks');
const fs = require('fs');
const Module = require('module');
const util = require('util');
const vm = require('vm');

const PATH = '/workspace/main.js';
const MAX_TEXT_BYTES = 8192;
const PIECE_BYTES = 32 << 10;

function cutHead(text, cap) {
  const data = Buffer.from(text, 'utf8');
  return data.length <= cap ? text : data.subarray(0, cap).toString('utf8');
}

function cutTail(text, cap) {
  const data = Buffer.from(text, 'utf8');
  return data.length <= cap ? text : '[...]\n' + data.subarray(data.length - cap + 6).toString('utf8');
}

// `text` within `cap` bytes: its head and tail around a marker (child/session.py's cut()).
function cut(text, cap) {
  const data = Buffer.from(text, 'utf8');
  if (data.length <= cap) {
    return text;
  }
  const half = Math.floor(cap / 2);
  return data.subarray(0, half).toString('utf8') +
         `\n[... ${data.length - 2 * half} bytes omitted ...]\n` +
         data.subarray(data.length - half).toString('utf8');
}

// The stack without the frames of this file and of Node's vm module, which ran the code.
function ownStack(error) {
  let stack;
  try {
    stack = error instanceof Error && typeof error.stack === 'string' ? error.stack
                                                                     : 'Uncaught ' + util.inspect(error);
  } catch (_) {
    stack = 'Uncaught exception';
  }
  const lines = stack.split('\n');
  const at = lines.findIndex((line) => line.includes('node:vm') || line.includes(__filename));
  return (at < 0 ? lines : lines.slice(0, at)).join('\n') + '\n';
}

function record(error) {
  const traceback = ownStack(error);
  let type = typeof error;
  let message = '';
  try {
    if (error instanceof Error) {
      type = String(error.name);
      message = String(error.message);
    } else {
      message = util.inspect(error);
    }
  } catch (_) {
    message = '<unprintable exception>';
  }
  process.stderr.write(traceback);
  return {type: cutHead(type, MAX_TEXT_BYTES), message: cutHead(message, MAX_TEXT_BYTES),
          traceback: cutTail(traceback, MAX_TEXT_BYTES)};
}

function writeAll(fd, data) {
  let done = 0;
  while (done < data.length) {
    done += fs.writeSync(fd, data, done);
  }
}

function isThenable(value) {
  return value !== null && (typeof value === 'object' || typeof value === 'function') &&
         typeof value.then === 'function';
}

// The names a CommonJS main.js would have, as globals of the one context.
function provideModuleNames() {
  const main = new Module(PATH, null);
  main.filename = PATH;
  main.paths = Module._nodeModulePaths('/workspace');
  Object.assign(globalThis, {require: Module.createRequire(PATH), module: main,
                             exports: main.exports, __filename: PATH, __dirname: '/workspace'});
}

function compileAndRun(options) {
  const source = fs.readFileSync(PATH, 'utf8');
  return new vm.Script(source, {filename: PATH}).runInThisContext(options);
}

function runOnce(reportFd) {
  const report = (value) => writeAll(reportFd, Buffer.from(JSON.stringify(value) + '\n'));
  const fail = (error) => {
    report(record(error));
    process.exit(1);
  };
  process.on('uncaughtException', fail);
  provideModuleNames();
  let value;
  try {
    value = compileAndRun({});
  } catch (error) {
    fail(error);
  }
  const done = (result) => {
    if (result !== undefined) {
      report({result: util.inspect(result)});
    }
  };
  if (isThenable(value)) {
    value.then(done, fail);
  } else {
    done(value);
  }
}

class SessionExit {
  constructor(code) {
    this.code = code;
  }
}

function serveSession() {
  const answer = (message) => {
    const data = Buffer.from(JSON.stringify(message));
    for (let at = 0; at === 0 || at < data.length; at += PIECE_BYTES) {
      const last = at + PIECE_BYTES >= data.length;
      // One write, one record on the channel: PID 1 reads the kernel's credentials on each.
      fs.writeSync(4, Buffer.concat([Buffer.from(last ? '.' : '+'), data.subarray(at, at + PIECE_BYTES)]));
    }
  };
  let current = null;  // the run in progress: {seq, abort(error)} while its last value is awaited
  // Which run scheduled the callback that is running: an error thrown by a callback of an
  // earlier run is that run's output, not the failure of the run in progress.
  const runs = new AsyncLocalStorage();
  process.exit = (code) => {
    throw new SessionExit(code === undefined ? (process.exitCode || 0) : Number(code) | 0);
  };
  process.on('SIGINT', () => {
    if (current && current.abort) {
      current.abort(new Error('Script execution was interrupted by `SIGINT`'));
    }
  });
  process.on('uncaughtException', (error) => {
    if (error instanceof SessionExit) {
      return;  // a callback's process.exit() after its run: nothing to end
    }
    if (current && current.abort && runs.getStore() === current.seq) {
      current.abort(error);
    } else {
      process.stderr.write(ownStack(error));  // printed as Node prints it; it fails no run
    }
  });
  provideModuleNames();

  const run = async (seq, resultCap) => {
    current = {seq};
    answer({started: seq});
    const outcome = {run: seq, exit: {code: 0}, exception: null, result: null};
    try {
      let value = runs.run(seq, () => compileAndRun({breakOnSigint: true}));
      if (isThenable(value)) {
        value = await new Promise((resolve, reject) => {
          current.abort = reject;
          value.then(resolve, reject);
        });
      }
      if (value !== undefined) {
        outcome.result = cut(util.inspect(value), resultCap);
      }
    } catch (error) {
      if (error instanceof SessionExit) {
        outcome.exit.code = error.code & 0xff;
      } else {
        outcome.exit.code = 1;
        outcome.exception = record(error);
      }
    }
    current = null;
    for (const stream of [process.stdout, process.stderr]) {
      if (stream.writableLength > 0) {
        await new Promise((resolve) => stream.once('drain', resolve));
      }
    }
    answer(outcome);
  };

  let pending = '';
  let queue = Promise.resolve();
  const commands = fs.createReadStream(null, {fd: 3, encoding: 'ascii'});
  commands.on('data', (chunk) => {
    pending += chunk;
    let end;
    while ((end = pending.indexOf('\n')) >= 0) {
      const [seq, cap] = pending.slice(0, end).split(' ').map(Number);
      pending = pending.slice(end + 1);
      queue = queue.then(() => run(seq, cap));
    }
  });
  commands.on('end', () => process.reallyExit(0));
}

if (process.argv[2] === 'run') {
  runOnce(Number(process.argv[3]));
} else {
  serveSession();
}
