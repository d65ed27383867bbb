'use strict';
// A JavaScript run's or session's interpreter (Node.js), as PID 1 starts it (languages.py):
// `node runner.js run REPORT_FD` runs /workspace/main.js once; `node runner.js session MORE LAST
// PIECE_BYTES` runs each run's main.js when PID 1 writes "RUN RESULT_CAP\n" on fd 3 and answers
// on fd 4, as child/session.py does, in records of the channel whose markers and piece size it is
// given: scs_launcher/channel.py writes the channel's grammar, languages.py passes them, and they
// are taken out of process.argv before any code runs.
//
// The code runs in the one global context in V8's REPL mode, as Chrome's DevTools console runs
// its input: evaluated through in-process inspector sessions (Runtime.evaluate with replMode; no
// port is opened, nothing listens). So globals (var, function, class, and top-level let and
// const) carry over between a session's runs; a later run may declare again a let, const, class
// or function of an earlier one as the same kind (the newest wins; one that was a let cannot
// become a const), also one whose initialiser threw; and top-level `await` works, in a session
// and in a run alike. Static `import` declarations at the top level (default, named, namespace,
// side-effect, with attributes; not the text of strings, templates or comments) are rewritten,
// line for line: as in a module, their modules are loaded, and the names they take checked,
// before any of the code runs; the code then takes them as consts from the import's line on
// (not hoisted above it), with no await. `import(...)` becomes a call that resolves as an
// ES module would from main.js, and `import.meta` main.js's (its `resolve` as require's).
// Modules resolve from main.js, so './x.mjs' and packages in /workspace/node_modules are found.
// require, module, exports, __filename and __dirname are main.js's.
//
// The value of the last expression, awaited when it is a Promise, is the run's result
// (util.inspect, cut to its cap); an uncaught exception is printed with its stack (without the
// frames of this file and of the inspector) and reported as {type, message, traceback}, the
// line it comes from first when that line is the run's own. The console does not report to the
// inspector too, so nothing logged is retained. In a session, process.exit() ends only the run,
// with its code, and SIGINT (PID 1's interrupt) ends the code in progress, not the process: a
// run awaiting is abandoned at once (what it awaits, and its source, are kept for as long as it
// may still settle: the inspector must not be left answering for a promise collected), and
// the synchronous part of a run's code, when it keeps
// the thread busy, is terminated from a worker thread that hears the signal too. Code busy after
// an await, or in a callback, cannot be ended so (nor can it in Node's own REPL): the server
// ends the session when its interrupt has no effect.

const {AsyncLocalStorage} = require('async_hooks');
const fs = require('fs');
const Module = require('module');
const url = require('url');
const util = require('util');
const vm = require('vm');

const PATH = '/workspace/main.js';
const DIRECTORY = '/workspace';
const MAX_TEXT_BYTES = 8192;
const IMPORT = '__scs_import';  // the global the rewritten imports call
const RUN = '__scs_run';        // the global the inspector calls to evaluate a run's code
const GROUP = 'scs-run';        // the inspector's handles of one run's value, released after it
const INTERRUPTED = 'Script execution was interrupted by `SIGINT`';

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

const MACHINERY = ['node:vm', 'node:inspector', __filename];
const TICKS = /^\s+at (process\.)?processTicksAndRejections \(node:internal\/process\/task_queues/;

// The stack without the frames of this file and of what ran the code for it (the inspector,
// Node's vm module), but with the code's own `at async` frames below them, and without the bare
// tick frame under code resumed after a top-level await.
function ownStack(error) {
  let stack;
  try {
    stack = error instanceof Error && typeof error.stack === 'string' ? error.stack
                                                                     : 'Uncaught ' + util.inspect(error);
  } catch (_) {
    stack = 'Uncaught exception';
  }
  let lines = stack.split('\n');
  const machinery = (line) => MACHINERY.some((marker) => line.includes(marker));
  const at = lines.findIndex(machinery);
  if (at >= 0) {
    const awaiting = lines.slice(at).filter((line) => /^\s+at async /.test(line) && !machinery(line));
    lines = lines.slice(0, at).concat(awaiting);
  }
  while (lines.length > 1 && TICKS.test(lines[lines.length - 1])) {
    lines.pop();
  }
  return lines.join('\n') + '\n';
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

function interruption() {
  const error = new Error(INTERRUPTED);
  error.stack = `Error: ${INTERRUPTED}`;
  return error;
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

// The names a CommonJS main.js would have, as globals of the one context, and the function the
// rewritten imports call.
function provideModuleNames() {
  const main = new Module(PATH, null);
  main.filename = PATH;
  main.paths = Module._nodeModulePaths(DIRECTORY);
  Object.assign(globalThis, {require: Module.createRequire(PATH), module: main,
                             exports: main.exports, __filename: PATH, __dirname: DIRECTORY});
  Object.defineProperty(globalThis, IMPORT, {value: importForCode, configurable: true, writable: true});
}

// import(specifier, options) as main.js's own: resolved from it, with the loader's "import"
// conditions, so that './x.mjs' and packages under /workspace/node_modules are found.
const load = (() => {
  if (vm.constants && vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER) {
    const imports = new vm.Script('(specifier, options) => import(specifier, options)', {
      filename: PATH, importModuleDynamically: vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER,
    }).runInThisContext();
    // Its first use says it is experimental, on the code's stderr: said once, here, to no one.
    const emitWarning = process.emitWarning;
    process.emitWarning = () => {};
    try {
      imports('node:path').catch(() => {});
    } finally {
      process.emitWarning = emitWarning;
    }
    return imports;
  }
  const path = require('path');
  return (specifier, options) => {
    let target = String(specifier);
    if (target.startsWith('.') || target.startsWith('/')) {
      target = url.pathToFileURL(path.resolve(DIRECTORY, target)).href;
    } else if (!Module.isBuiltin(target) && !/^[a-z]+:/.test(target)) {
      try {
        target = url.pathToFileURL(Module.createRequire(PATH).resolve(target)).href;
      } catch (_) { /* import() says it is not found */ }
    }
    return import(target, options);
  };
})();

// The module of an import declaration, with the names it takes, as linking a module checks them.
async function link(specifier, options, names) {
  const namespace = await load(specifier, options);
  for (const name of names) {
    if (!(name in namespace)) {
      throw new SyntaxError(
          `The requested module '${specifier}' does not provide an export named '${name}'`);
    }
  }
  return namespace;
}

// What the rewritten code calls: `import(...)` is importForCode(...), `import.meta` is its meta,
// and an import declaration takes the module linked before its run's code started.
const linked = new Map();  // evaluation -> its import declarations' modules, in order
function importForCode(specifier, options) {
  return load(specifier, options);
}
importForCode.meta = {
  url: 'file://' + PATH, filename: PATH, dirname: DIRECTORY,
  resolve: (specifier) => url.pathToFileURL(Module.createRequire(PATH).resolve(specifier)).href,
};
importForCode.linked = (evaluation, index) => linked.get(evaluation)[index];

// ---- The import rewrite ----------------------------------------------------------------------

const KEYWORDS_BEFORE_EXPRESSION = new Set(['return', 'typeof', 'instanceof', 'in', 'of', 'new',
  'delete', 'void', 'throw', 'case', 'do', 'else', 'yield', 'await']);
const PUNCTUATORS = ['>>>=', '...', '===', '!==', '**=', '<<=', '>>=', '>>>', '&&=', '||=', '??=',
  '=>', '==', '!=', '<=', '>=', '&&', '||', '??', '?.', '++', '--', '+=', '-=', '*=', '/=', '%=',
  '&=', '|=', '^=', '<<', '>>', '**'];

// The code's tokens (comments dropped), each {type, text, start, end, depth}: type is name,
// string, number, regex, template (a literal's text around its ${...}) or punct; depth is the
// nesting in (), [], {} and ${} where it starts. A small scanner, not a parser: it only has to
// find `import` where it is a keyword, and the import declarations at the top level.
function tokenize(source) {
  const tokens = [];
  const templates = [];  // for each open ${: the depth inside it
  let depth = 0;
  let i = 0;
  const n = source.length;
  const push = (type, start, end) => {
    tokens.push({type, text: source.slice(start, end), start, end, depth});
  };
  const regexAllowed = () => {
    const last = tokens[tokens.length - 1];
    if (!last) {
      return true;
    }
    if (last.type === 'name') {
      return KEYWORDS_BEFORE_EXPRESSION.has(last.text);
    }
    return last.type === 'punct' && last.text !== ')' && last.text !== ']';
  };
  // A template literal's text from its opening backtick (or the } that closes a ${) at
  // `start`: to its end, or into a ${.
  const template = (start) => {
    let j = start + 1;
    while (j < n) {
      if (source[j] === '\\') {
        j += 2;
      } else if (source[j] === '`') {
        push('template', start, j + 1);
        return j + 1;
      } else if (source[j] === '$' && source[j + 1] === '{') {
        push('template', start, j + 2);
        depth += 1;
        templates.push(depth);
        return j + 2;
      } else {
        j += 1;
      }
    }
    push('template', start, n);
    return n;
  };
  if (source.startsWith('#!')) {
    i = source.indexOf('\n');
    i = i < 0 ? n : i;
  }
  while (i < n) {
    const c = source[i];
    if (/\s/.test(c)) {
      i += 1;
    } else if (c === '/' && source[i + 1] === '/') {
      const end = source.indexOf('\n', i);
      i = end < 0 ? n : end;
    } else if (c === '/' && source[i + 1] === '*') {
      const end = source.indexOf('*/', i + 2);
      i = end < 0 ? n : end + 2;
    } else if (c === '"' || c === "'") {
      let j = i + 1;
      while (j < n && source[j] !== c && source[j] !== '\n') {
        j += source[j] === '\\' ? 2 : 1;
      }
      push('string', i, Math.min(j + 1, n));
      i = j + 1;
    } else if (c === '`') {
      i = template(i);
    } else if (c === '}' && templates.length && templates[templates.length - 1] === depth) {
      templates.pop();
      depth -= 1;
      i = template(i);
    } else if (/[A-Za-z_$\u0080-\uffff\\]/.test(c)) {
      let j = i + 1;
      while (j < n && /[A-Za-z0-9_$\u0080-\uffff\\]/.test(source[j])) {
        j += 1;
      }
      push('name', i, j);
      i = j;
    } else if (/[0-9]/.test(c) || (c === '.' && /[0-9]/.test(source[i + 1] || ''))) {
      let j = i + 1;
      while (j < n && /[0-9A-Za-z_.]/.test(source[j])) {
        j += 1;
      }
      push('number', i, j);
      i = j;
    } else if (c === '/' && regexAllowed()) {
      let j = i + 1;
      let inClass = false;
      while (j < n && source[j] !== '\n' && (inClass || source[j] !== '/')) {
        if (source[j] === '\\') {
          j += 1;
        } else if (source[j] === '[') {
          inClass = true;
        } else if (source[j] === ']') {
          inClass = false;
        }
        j += 1;
      }
      if (j < n && source[j] === '/') {
        j += 1;
        while (j < n && /[A-Za-z]/.test(source[j])) {
          j += 1;
        }
        push('regex', i, j);
        i = j;
      } else {  // no regular expression after all: a division
        push('punct', i, i + 1);
        i += 1;
      }
    } else {
      if (c === ')' || c === ']' || c === '}') {
        depth = Math.max(0, depth - 1);
      }
      let long = PUNCTUATORS.find((p) => source.startsWith(p, i));
      if (long === '?.' && /[0-9]/.test(source[i + 2] || '')) {
        long = undefined;  // a ?.5 : b
      }
      const end = i + (long ? long.length : 1);
      push('punct', i, end);
      if (c === '(' || c === '[' || c === '{') {
        depth += 1;
      }
      i = end;
    }
  }
  return tokens;
}

// The value of a string literal token.
function literal(token) {
  return new vm.Script(token.text).runInThisContext();
}

// The import declaration whose `import` is tokens[at]: {end (the index of the token after it),
// specifier, options, names (what it takes), local, namespace, fields}, or null when it is not
// one read here (the engine then says why it is not valid).
function importDeclaration(tokens, at) {
  let k = at + 1;
  const is = (type, text) => tokens[k] && tokens[k].type === type &&
                             (text === undefined || tokens[k].text === text);
  const take = (type, text) => (is(type, text) ? tokens[k++] : null);
  let local = null;       // the default binding
  let namespace = null;   // import * as namespace
  const pairs = [];       // [imported name as written, local binding]
  let specifier = take('string');
  if (!specifier) {
    if (is('name') && !(tokens[k].text === 'from' && tokens[k + 1] && tokens[k + 1].type === 'string')) {
      local = take('name').text;
      if (!take('punct', ',') && !is('name', 'from')) {
        return null;
      }
    }
    if (take('punct', '*')) {
      if (!take('name', 'as') || !is('name')) {
        return null;
      }
      namespace = take('name').text;
    } else if (take('punct', '{')) {
      while (!take('punct', '}')) {
        const imported = take('name') || take('string');
        if (!imported) {
          return null;
        }
        let binding = imported;
        if (take('name', 'as')) {
          binding = take('name');
        }
        if (!binding || binding.type !== 'name') {
          return null;
        }
        pairs.push([imported, binding.text]);
        if (!take('punct', ',') && !is('punct', '}')) {
          return null;
        }
      }
    } else if (local === null) {
      return null;
    }
    if (!take('name', 'from')) {
      return null;
    }
    specifier = take('string');
    if (!specifier) {
      return null;
    }
  }
  let options;
  if ((is('name', 'with') || is('name', 'assert')) && tokens[k + 1] && tokens[k + 1].text === '{') {
    k += 2;
    const attributes = {};
    while (!take('punct', '}')) {
      const key = take('name') || take('string');
      if (!key || !take('punct', ':') || !is('string')) {
        return null;
      }
      attributes[key.type === 'string' ? literal(key) : key.text] = literal(take('string'));
      if (!take('punct', ',') && !is('punct', '}')) {
        return null;
      }
    }
    options = {with: attributes};
  }
  take('punct', ';');
  const names = local === null ? [] : ['default'];
  const fields = local === null || namespace !== null ? [] : [`default: ${local}`];
  for (const [imported, binding] of pairs) {
    names.push(imported.type === 'string' ? literal(imported) : imported.text);
    fields.push(imported.text === binding ? binding : `${imported.text}: ${binding}`);
  }
  return {end: k, specifier: literal(specifier), options, names, local, namespace, fields};
}

// The code with its imports rewritten, each on the lines it had (a declaration's replacement is
// on its first line, followed by as many line breaks as it spanned), and its import
// declarations' modules, [{specifier, options, names, line, column}], to link before it runs:
// as in a module, they are loaded and checked before any of the code runs, and the code takes
// them without an await (so that the code stays synchronous, and can be interrupted).
function rewriteImports(source, evaluation) {
  const imports = [];
  if (!source.includes('import')) {
    return {code: source, imports};
  }
  let tokens;
  try {
    tokens = tokenize(source);
  } catch (_) {
    return {code: source, imports};
  }
  let out = '';
  let copied = 0;
  for (let k = 0; k < tokens.length; k += 1) {
    const token = tokens[k];
    const before = tokens[k - 1];
    if (token.type !== 'name' || token.text !== 'import' ||
        (before && (before.text === '.' || before.text === '?.'))) {
      continue;
    }
    const next = tokens[k + 1];
    if (next && (next.text === '(' || next.text === '.')) {
      if (next.text === '(') {
        // A method named import (`import(...) {`) stays as it is.
        let close = k + 2;
        while (close < tokens.length &&
               !(tokens[close].text === ')' && tokens[close].depth === next.depth)) {
          close += 1;
        }
        if (tokens[close + 1] && tokens[close + 1].text === '{') {
          continue;
        }
      }
      out += source.slice(copied, token.start) + IMPORT;
      copied = token.end;
    } else if (token.depth === 0) {
      let declaration = null;
      try {
        declaration = importDeclaration(tokens, k);
      } catch (_) { /* left as it is: its error is the engine's */ }
      if (declaration === null) {
        continue;
      }
      const end = tokens[declaration.end - 1].end;
      const lineStart = source.lastIndexOf('\n', token.start - 1) + 1;
      const line = (source.slice(0, lineStart).match(/\n/g) || []).length;
      const {specifier, options, names, local, namespace, fields} = declaration;
      imports.push({specifier, options, names, line, column: token.start - lineStart});
      const module = `${IMPORT}.linked(${evaluation}, ${imports.length - 1})`;
      let code;
      if (namespace !== null) {
        code = `const ${namespace} = ${module}` +
               (local === null ? ';' : `, ${local} = ${namespace}.default;`);
      } else if (fields.length) {
        code = `const {${fields.join(', ')}} = ${module};`;
      } else {
        code = ';';  // import 'm': the module ran when it was linked
      }
      const lines = (source.slice(token.start, end).match(/\n/g) || []).length;
      out += source.slice(copied, token.start) + code + '\n'.repeat(lines);
      copied = end;
      k = declaration.end - 1;
    }
  }
  return {code: out + source.slice(copied), imports};
}

// ---- Running the code -----------------------------------------------------------------------

// The console as Node's own, not reporting to the inspector too: a connected inspector session
// would otherwise keep (up to a thousand) logged values alive, and slow every call.
function detachConsole() {
  const {Console} = require('console');
  const plain = new Console({stdout: process.stdout, stderr: process.stderr, ignoreErrors: true,
                             colorMode: 'auto'});
  for (const key of Object.keys(console)) {
    if (typeof console[key] === 'function' && typeof plain[key] === 'function' && key !== 'Console') {
      console[key] = plain[key];
    }
  }
}

// An evaluator of code in the global context: evaluate(source) gives a promise of {value},
// {thrown} or {failed} (the inspector's own error, or the code was terminated). hooks.enter()
// and hooks.leave() bracket the synchronous part of the code, the one part the interrupter may
// terminate (a termination in a callback, or after an await, would break Node's own
// bookkeeping: an assertion ends the process); leave() says whether the interrupter has taken it
// to terminate. The code is evaluated from a function (RUN) that an evaluation on a second
// session calls: a termination is then thrown and caught within an evaluation (which ends it
// there; a Runtime.callFunctionOn would not), even when the code's synchronous part ends just as
// it is asked for: if it lands in this file's own code around the evaluation, the outer
// evaluation catches it too.
// oneRun: the process runs one run's code (the stack of any error of it shows its line).
function evaluator(hooks, oneRun) {
  let inspector;
  try {
    inspector = require('inspector');
  } catch (_) {
    return null;
  }
  const code = new inspector.Session();   // evaluates the code
  const outer = new inspector.Session();  // calls the function that does
  code.connect();
  outer.connect();
  detachConsole();
  const postNow = (session, method, params) => {
    let answer = null;
    session.post(method, params, (error, result) => {
      answer = {error, result};
    });
    if (answer === null) {
      throw new Error(`the inspector did not answer ${method} at once`);
    }
    if (answer.error) {
      throw answer.error;
    }
    return answer.result;
  };
  // A function of this file as the inspector's object, to call with Runtime.callFunctionOn.
  const handle = (session, fn) => {
    const key = Symbol.for('scs.handle');
    Object.defineProperty(globalThis, key, {value: fn, configurable: true});
    try {
      return postNow(session, 'Runtime.evaluate', {expression: 'globalThis[Symbol.for("scs.handle")]',
                                                   objectGroup: 'scs-handles'}).result.objectId;
    } finally {
      delete globalThis[key];
    }
  };
  // The inspector holds the code's value (or exception) and calls the sink with it: the real
  // object, for util.inspect and record().
  let taken;
  const sink = handle(code, (value) => {
    taken = value;
  });
  const real = (remote) => {
    if (!remote || remote.type === 'undefined') {
      return undefined;
    }
    const argument = 'objectId' in remote ? {objectId: remote.objectId}
                   : 'unserializableValue' in remote ? {unserializableValue: remote.unserializableValue}
                   : {value: remote.value};
    taken = undefined;
    postNow(code, 'Runtime.callFunctionOn', {objectId: sink, arguments: [argument], silent: true,
                                             functionDeclaration: 'function (value) { this(value); }'});
    const value = taken;
    taken = undefined;
    return value;
  };
  let job = null;
  Object.defineProperty(globalThis, RUN, {value: () => job()});
  // The promises of the evaluations not settled yet. The inspector holds one only weakly, and
  // when one is collected (its code awaits what never settles) it answers from the garbage
  // collector, calling into JavaScript there: a fatal error. So each is held here until it has
  // its answer, for ever if it never settles; the first promise made as the code starts is it.
  const unsettled = new Set();
  const {promiseHooks} = require('v8');

  const evaluate = (source, rewritten) => new Promise((resolve) => {
    const expression = rewritten + `\n//# sourceURL=${PATH}`;
    let settled = false;
    const settle = (outcome) => {
      if (!settled) {
        settled = true;
        resolve(outcome);
      }
    };
    let evaluation = null;
    let answered = false;
    let synchronous = true;
    const answer = (error, result) => {
      answered = true;
      unsettled.delete(evaluation);
      try {
        if (error) {
          settle({failed: error});
        } else if (result.exceptionDetails) {
          const thrown = real(result.exceptionDetails.exception);
          // Answered at once, it is a compile error (nothing ran), with no frame of main.js.
          const {lineNumber, columnNumber} = result.exceptionDetails;
          settle({thrown: synchronous ? located(thrown, source, lineNumber, columnNumber)
                                      : locatedAtTop(thrown, source, oneRun)});
        } else {
          settle({value: real(result.result)});
        }
      } catch (failure) {
        settle({failed: failure});
      }
      code.post('Runtime.releaseObjectGroup', {objectGroup: GROUP});
      code.post('Runtime.discardConsoleEntries');
    };
    let stop = () => {};
    job = () => {
      stop = promiseHooks.onInit((promise) => {
        if (evaluation === null) {
          evaluation = promise;
        }
      });
      hooks.enter();
      code.post('Runtime.evaluate', {expression, replMode: true, objectGroup: GROUP}, answer);
      stop();
      if (hooks.leave() && !answered) {
        // The code's synchronous part ended as the interrupter acted: its termination is on its
        // way, to be taken here.
        const end = Date.now() + 3000;
        return () => Date.now() < end;
      }
      return null;
    };
    try {
      const expression = `{ const spin = ${RUN}(); if (spin) { while (spin()) {} } }`;
      const around = postNow(outer, 'Runtime.evaluate', {expression, silent: true});
      if (around.exceptionDetails) {  // the code could not be started (RUN shadowed?)
        const {exception} = around.exceptionDetails;
        settle({failed: new Error(`the code did not start: ${exception && exception.description}`)});
      }
    } catch (failure) {
      settle({failed: failure});  // terminated, around the code
    } finally {
      stop();
      hooks.leave();
      job = null;
      synchronous = false;
    }
    if (!answered && evaluation !== null) {
      unsettled.add(evaluation);
    }
  });

  let evaluations = 0;
  return async (source) => {
    const evaluation = ++evaluations;
    const {code: rewritten, imports} = rewriteImports(source, evaluation);
    const modules = [];
    for (const {specifier, options, names, line, column} of imports) {
      try {
        modules.push(await link(specifier, options, names));
      } catch (error) {
        return {thrown: located(error, source, line, column)};
      }
    }
    if (modules.length) {
      linked.set(evaluation, modules);
    }
    // The code takes its imports as it reaches their lines, after an await too: they are let
    // go when it has settled.
    const outcome = evaluate(source, rewritten);
    outcome.then(() => linked.delete(evaluation));
    return outcome;
  };
}

// An error thrown from the run's code: the line it comes from first, as Node shows an error of a
// script. In a session, only when its innermost frame of main.js is the top level's, not a
// function's, which could be an earlier run's (whose code is not at hand).
function locatedAtTop(error, source, anyFunction) {
  let stack;
  try {
    stack = error instanceof Error && typeof error.stack === 'string' ? error.stack : null;
  } catch (_) {
    stack = null;
  }
  const frame = stack && stack.split('\n').find((line) => /^\s+at /.test(line) && line.includes(PATH));
  const at = frame && (anyFunction ? /^\s+at (?:.* \()?\/workspace\/main\.js:(\d+):(\d+)\)?$/
                                    : /^\s+at \/workspace\/main\.js:(\d+):(\d+)$/).exec(frame);  // PATH's
  const line = at && source.split('\n')[Number(at[1]) - 1];
  if (line !== undefined && line !== null && !stack.startsWith(PATH)) {
    try {
      error.stack = `${PATH}:${at[1]}\n${line}\n${' '.repeat(Number(at[2]) - 1)}^\n\n${stack}`;
    } catch (_) { /* as it is */ }
  }
  return error;
}

// An error of the code before it ran (it does not compile, or an import declaration's module
// cannot be linked), shown where it is, as Node shows such an error of a script or module.
function located(error, source, lineNumber, columnNumber) {
  const line = typeof lineNumber === 'number' ? source.split('\n')[lineNumber] : undefined;
  if (line !== undefined && error instanceof Error) {
    try {
      const stack = String(error.stack);
      const headline = stack.slice(0, (stack.indexOf('\n    at ') + 1 || stack.length + 1) - 1);
      const caret = ' '.repeat(columnNumber || 0) + '^';
      error.stack = `${PATH}:${lineNumber + 1}\n${line}\n${caret}\n\n${headline}`;
    } catch (_) { /* as it is */ }
  }
  return error;
}

// Without an inspector (a Node built without one): a script, with no REPL mode, top-level await
// nor import rewrite.
function scriptEvaluator(breakOnSigint) {
  return (source) => {
    try {
      const value = new vm.Script(source, {filename: PATH}).runInThisContext({breakOnSigint});
      return Promise.resolve({value});
    } catch (error) {
      return Promise.resolve({thrown: error});
    }
  };
}

function runOnce(reportFd) {
  const report = (value) => writeAll(reportFd, Buffer.from(JSON.stringify(value) + '\n'));
  const fail = (error) => {
    report(record(error));
    process.exit(1);
  };
  process.on('uncaughtException', fail);
  const evaluate = evaluator({enter: () => {}, leave: () => false}, true) || scriptEvaluator(false);
  provideModuleNames();
  const done = (result) => {
    if (result !== undefined) {
      report({result: util.inspect(result)});
    }
  };
  evaluate(fs.readFileSync(PATH, 'utf8')).then((outcome) => {
    if ('thrown' in outcome) {
      fail(outcome.thrown);
    } else if ('failed' in outcome) {
      fail(outcome.failed);
    } else if (isThenable(outcome.value)) {
      outcome.value.then(done, fail);
    } else {
      done(outcome.value);
    }
  });
}

class SessionExit {
  constructor(code) {
    this.code = code;
  }
}

// What this thread and the interrupter share: the SIGINTs this thread has handled, and whether
// the synchronous part of a run's code is running (RUNNING) or the interrupter has taken it to
// terminate (TERMINATING).
const HANDLED = 0;
const CODE = 1;
const RUNNING = 1;
const TERMINATING = 2;
const WAIT_MS = 100;

// A worker thread that hears SIGINT as this thread does (a worker's process.on() hears no
// signal; Node's signal handle does) and, while this thread has not handled it (after WAIT_MS,
// when the synchronous part of a run's code keeps it busy), asks the inspector, from its own
// thread, to terminate the JavaScript running here. Code that is busy elsewhere (after an await,
// in a callback) it leaves alone. Its session connects only for that: a connected one would
// make the exit of the process wait for it.
function startInterrupter(state) {
  const {Worker} = require('worker_threads');
  const source = `'use strict';
    const {workerData: state} = require('worker_threads');
    const inspector = require('inspector');
    process.noDeprecation = true;
    const {Signal} = process.binding('signal_wrap');
    const signal = new Signal();
    let heard;  // the SIGINTs heard here, counted as this thread counts those it handled
    signal.onsignal = () => {
      const signalled = ++heard;
      const start = Date.now();
      const check = () => {
        if (Atomics.load(state, ${HANDLED}) >= signalled || Date.now() - start > 10000) {
          return;
        }
        if (Date.now() - start >= ${WAIT_MS} &&
            Atomics.compareExchange(state, ${CODE}, ${RUNNING}, ${TERMINATING}) === ${RUNNING}) {
          const session = new inspector.Session();
          session.connectToMainThread();
          session.post('Runtime.terminateExecution', () => session.disconnect());
          return;
        }
        setTimeout(check, 10);
      };
      setTimeout(check, 10);
    };
    signal.start(${require('os').constants.signals.SIGINT});
    heard = Atomics.load(state, ${HANDLED});`;
  try {
    const resourceLimits = {maxOldGenerationSizeMb: 16, maxYoungGenerationSizeMb: 4};
    const worker = new Worker(source, {eval: true, workerData: state, resourceLimits});
    worker.on('error', () => {});  // without it, busy code is only ended with its session
    worker.unref();
  } catch (_) { /* the same */ }
}

// The channel's words as languages.py passes them (MORE LAST PIECE_BYTES), taken out of argv,
// so that the code sees the argv it always did. Without them no answer could be written: the
// session does not start.
function channelWords(argv) {
  const [more, last, pieceBytes] = argv.splice(3, 3);
  const channel = {
    more: Buffer.from(more || '', 'latin1'),
    last: Buffer.from(last || '', 'latin1'),
    pieceBytes: Number(pieceBytes),
  };
  if (channel.more.length !== 1 || channel.last.length !== 1 ||
      !Number.isSafeInteger(channel.pieceBytes) || channel.pieceBytes <= 0) {
    process.stderr.write('runner.js: session MORE LAST PIECE_BYTES (one byte, one byte, > 0)\n');
    process.exit(2);
  }
  return channel;
}

function serveSession({more, last, pieceBytes}) {
  const answer = (message) => {
    const data = Buffer.from(JSON.stringify(message));
    for (let at = 0; at === 0 || at < data.length; at += pieceBytes) {
      const marker = at + pieceBytes >= data.length ? last : more;
      // One write, one record on the channel: PID 1 reads the kernel's credentials on each.
      fs.writeSync(4, Buffer.concat([marker, data.subarray(at, at + pieceBytes)]));
    }
  };
  const state = new Int32Array(new SharedArrayBuffer(2 * Int32Array.BYTES_PER_ELEMENT));
  let current = null;  // the run in progress: {seq, abort(error), terminated}
  const enter = () => Atomics.store(state, CODE, RUNNING);
  const leave = () => {
    const terminating = Atomics.exchange(state, CODE, 0) === TERMINATING;
    if (terminating && current) {
      current.terminated = true;
    }
    return terminating;
  };
  // Which run scheduled the callback that is running: an error thrown by a callback of an
  // earlier run is that run's output, not the failure of the run in progress.
  const runs = new AsyncLocalStorage();
  process.exit = (code) => {
    throw new SessionExit(code === undefined ? (process.exitCode || 0) : Number(code) | 0);
  };
  process.on('SIGINT', () => {
    Atomics.add(state, HANDLED, 1);
    if (current) {
      current.abort(interruption());
    }
  });
  process.on('uncaughtException', (error) => {
    if (error instanceof SessionExit) {
      return;  // a callback's process.exit() after its run: nothing to end
    }
    if (current && runs.getStore() === current.seq) {
      current.abort(error);
    } else {
      process.stderr.write(ownStack(error));  // printed as Node prints it; it fails no run
    }
  });
  let evaluate = evaluator({enter, leave}, false);
  if (evaluate) {
    startInterrupter(state);
  } else {
    evaluate = scriptEvaluator(true);
  }
  provideModuleNames();

  const run = async (seq, resultCap) => {
    // A SIGINT sent for the run before this one is handled before this one starts.
    await new Promise((resolve) => setImmediate(resolve));
    const aborted = new Promise((_, reject) => {
      current = {seq, abort: reject, terminated: false};
    });
    aborted.catch(() => {});
    const thisRun = current;
    answer({started: seq});
    const outcome = {run: seq, exit: {code: 0}, exception: null, result: null};
    try {
      const source = fs.readFileSync(PATH, 'utf8');
      const evaluated = await Promise.race([runs.run(seq, () => evaluate(source)), aborted]);
      if ('thrown' in evaluated) {
        throw evaluated.thrown;
      }
      if ('failed' in evaluated) {
        throw thisRun.terminated ? interruption() : evaluated.failed;
      }
      let value = evaluated.value;
      if (isThenable(value)) {
        value = await Promise.race([value, aborted]);
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
  serveSession(channelWords(process.argv));
}
