"""Sandbox launcher: PID 1 of every sandbox. Unpacks the run's bundle from stdin into
/workspace, runs main.py, ends every process, reports.

Runs as the sandbox's uid under `python3 -I`, before any user code. The bundle is an uncompressed
ustar built by the server; it is checked again here because Docker's own extraction trusts tar
headers. Only regular files and directories are accepted, with fixed modes and no links of any
kind. Any violation exits 125 with "sandbox launcher: rejected <why>" on stderr.

Members under .scs/ configure the launcher and are never written to disk: control.json (a
per-run nonce, the caps on returned files and the run's watchdog) and stdin.

Being PID 1 keeps the sandbox's deadline out of the program's reach. Linux delivers to a PID
namespace's init no signal from inside the namespace that it does not handle, SIGSTOP and SIGKILL
included, and this launcher handles none (it ignores every signal it can). It makes itself
non-dumpable, so the program, which has the same uid, can neither ptrace it nor read its memory
through /proc. `--deadline SECONDS` bounds the sandbox's whole life (a sandbox prepared ahead of
its run idles first); the control file's watchdog bounds the run from the moment its code
arrives. When either passes, a thread of PID 1 kills every process and PID 1 exits 137. gVisor
does not protect its init from signals, so the program's interpreter is also confined before it
starts (confine()): a seccomp filter refuses it ptrace, access to another process's memory,
memfd_create, extended attributes, new user namespaces and every signal addressed to PID 1, for
every process it starts. For an engine that cannot set resource limits or show its /proc masking (a Kubernetes
Pod), `--rlimits nofile=N,nproc=N,fsize=N,core=N` lowers PID 1's own limits, and `--masked` and
`--readonly PATH,...` check that those paths are masked and read-only, first, before anything
else runs; a path that is not ends the sandbox with 125. There `--confine` also gives the
sandbox, with Landlock, what its mounts cannot: nothing executes outside /usr, nothing of the
host's disk is written (confine_filesystem()).

It runs the program as its child, as `python3 -I main.py` would run it, except that stdout is
line-buffered and an uncaught exception is also reported over a pipe; that child interpreter is
started before the bundle is read (in a sandbox prepared ahead of its run, long before) and runs
nothing until the bundle has passed every check. PID 1 reaps every orphan while the program
runs. When the program's process ends, the launcher SIGKILLs every other process (thread groups
whose leader exited, stopped and traced processes included) until none is left, collects the
regular files under /workspace/out, writes to stderr "\\0SCS-END-<nonce>\\0" (stderr ends
there) and then to stdout "\\n\\0SCS-TRAILER-<nonce>\\0", one line of JSON and "\\n" (the
server strips both from the output), and exits with the program's exit code, or
128 + N when signal N killed it. The trailer's "exit" says which: {"code": N} or {"signal": N}.

`--session` (a session's sandbox, see session_main()) keeps one interpreter for many runs: stdin
then carries frames, "SCS-RUN <bytes>\n" and a bundle, or "SCS-INTERRUPT\n"; each run's code
executes in the interpreter's one namespace, and each run ends with its own end marker and
trailer, the trailer adding the repr of the value of the code's last expression as "result".
"""

import base64
import ctypes
import errno
import json
import os
import re
import resource
import signal
import socket
import stat
import sys
import tarfile
import threading
import time
import types

WORKSPACE = "/workspace"
MAIN = "/workspace/main.py"
CONTROL_DIR = ".scs"
ALLOWED_TYPES = (tarfile.REGTYPE, tarfile.AREGTYPE, tarfile.DIRTYPE)
CHUNK = 1 << 16
MAX_CONTROL_BYTES = 1 << 16
MAX_EXCEPTION_BYTES = 1 << 16
MAX_TEXT_BYTES = 8 << 10
MAX_ANSWER_BYTES = 1 << 20  # a session interpreter's answer line, result included
PR_SET_DUMPABLE = 4
KILL_PATIENCE_SECONDS = 5
PYTHON = "/usr/bin/python3"
CLONE_NEWUSER = 0x10000000

# The child: `python3 -I main.py` with a report of an uncaught exception. It is started before
# the code arrives (its interpreter start-up is off the run's path) and waits for one byte on
# the go pipe: "0" runs main.py with stdin on /dev/null, "1" with the stdin pipe, nothing (the
# launcher gave up) exits. Before it waits it imports the modules named in its third argument
# (a sandbox prepared ahead of its run: `--warm`), with their output and warnings discarded.
# The functions remove their names first, so main.py starts with the namespace it would have;
# what the program can tell is the time its own imports take, sys.modules, the threads those
# modules started (OpenBLAS's), and that the objects the imports made are frozen out of the
# garbage collector's view (gc.get_freeze_count()). Those threads are started with every signal
# blocked, so a signal sent to the process reaches the program's own threads as it would in a
# fresh interpreter (a thread that did not block SIGRTMIN would be killed by one the program
# queues to itself with SIGRTMIN blocked, and the whole process with it).
# An uncaught exception of the code in `path`, as both interpreters handle it: its traceback
# cut to the code's own frames and printed as Python prints it, and its record returned:
# {type, message, traceback}, valid UTF-8, the traceback's end when it is long. Each interpreter
# removes the name from __main__ before user code runs.
EXCEPTION_RECORD = r"""
def _scs_uncaught(error, path):
    import sys
    import traceback

    tb = error.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != path:
        tb = tb.tb_next
    error.__traceback__ = tb
    try:
        sys.excepthook(type(error), error, tb)
    except BaseException:
        sys.__excepthook__(type(error), error, tb)

    def clean(text):
        return text.encode("utf-8", "replace").decode("utf-8")

    kind = type(error)
    name = kind.__qualname__
    if kind.__module__ not in ("builtins", "__main__"):
        name = kind.__module__ + "." + name
    try:
        message = str(error)
    except BaseException:
        message = "<unprintable " + name + " object>"
    text = clean("".join(traceback.format_exception(kind, error, tb)))
    data = text.encode("utf-8")
    if len(data) > 8192:
        text = "[...]\n" + data[-8186:].decode("utf-8", "ignore")
    return {"type": clean(name), "message": clean(message[:8192]), "traceback": text}
"""

BOOTSTRAP = EXCEPTION_RECORD + r"""
def _scs_warm(names):
    import importlib
    import os
    import signal
    import sys
    import warnings

    mask = signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
    saved = [os.dup(1), os.dup(2)]
    null = os.open("/dev/null", os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    os.close(null)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for name in names:
                try:
                    importlib.import_module(name)
                except Exception:
                    pass  # not in this image: nothing to warm
    finally:
        # What the imports made lives as long as the interpreter: the collector need not
        # look at it again, and the interpreter's exit need not (about 100 ms with pandas).
        import gc

        gc.collect()
        gc.freeze()
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in saved:
            os.close(fd)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def _scs_run():
    import os
    import sys

    fd = int(sys.argv[1])
    go = int(sys.argv[2])
    os.set_inheritable(fd, False)
    namespace = sys.modules["__main__"].__dict__
    warm = namespace.pop("_scs_warm")
    if sys.argv[3]:
        warm(sys.argv[3].split(","))
    del warm
    signal = os.read(go, 1)
    os.close(go)
    if signal not in (b"0", b"1"):
        os._exit(0)
    if signal == b"0":
        null = os.open("/dev/null", os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
    owner = os.getpid()
    path = "/workspace/main.py"
    sys.argv[:] = ["main.py"]
    sys.stdout.reconfigure(line_buffering=True)
    del namespace["_scs_run"]
    report = namespace.pop("_scs_report")
    uncaught = namespace.pop("_scs_uncaught")
    namespace["__file__"] = path
    namespace["__cached__"] = None
    namespace["__loader__"] = sys.modules["_frozen_importlib_external"].SourceFileLoader(
        "__main__", path)
    try:
        with open(path, "rb") as source:
            code = compile(source.read(), path, "exec", dont_inherit=True)
        exec(code, namespace)
    except SystemExit:
        raise
    except BaseException as error:
        record = uncaught(error, path)
        if os.getpid() == owner:
            report(fd, record)
        if isinstance(error, KeyboardInterrupt):
            import signal
            sys.stdout.flush()
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        raise SystemExit(1)


def _scs_report(fd, record):
    import json
    import os

    view = memoryview(json.dumps(record).encode("ascii") + b"\n")
    try:
        while view:
            view = view[os.write(fd, view):]
    except OSError:
        pass


_scs_run()
"""


def reject(why):
    sys.stderr.write(f"sandbox launcher: rejected {why}\n")
    sys.stderr.flush()
    os._exit(125)


def make_undumpable():
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        reject(f"setup: prctl(PR_SET_DUMPABLE) failed with errno {ctypes.get_errno()}")


def checked_parts(name):
    if not name or name.startswith("/"):
        reject(f"absolute or empty path {name!r}")
    parts = name.split("/")
    for part in parts:
        if part in ("", ".", ".."):
            reject(f"path {name!r}: empty, '.' or '..' component")
        if "\\" in part or len(os.fsencode(part)) > 255:
            reject(f"path {name!r}: bad or over-long component")
    return parts


def make_dir(path):
    try:
        os.mkdir(path, 0o755)
    except FileExistsError:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            reject(f"{path!r} exists and is not a directory")


def write_file(path, source, replace=False):
    if replace:
        try:
            if not stat.S_ISDIR(os.lstat(path).st_mode):
                os.unlink(path)  # a file or symlink an earlier run left: replaced, never followed
        except FileNotFoundError:
            pass
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    with os.fdopen(fd, "wb") as out:
        while chunk := source.read(CHUNK):
            out.write(chunk)


def unpack(stream, replace=False):
    """Writes the bundle to /workspace; returns the .scs/ members, kept in memory. With
    `replace` (a session's later runs) a regular file already there is replaced."""
    seen_main = False
    seen = set()
    control = {}
    with tarfile.open(fileobj=stream, mode="r|") as tar:
        for member in tar:
            if member.type not in ALLOWED_TYPES:
                reject(f"member {member.name!r}: type {member.type!r} is not a file or directory")
            parts = checked_parts(member.name)
            if parts[0] == CONTROL_DIR:
                if member.isdir() and len(parts) == 1:
                    continue
                if member.isdir() or len(parts) != 2 or parts[1] not in ("control.json", "stdin"):
                    reject(f"member {member.name!r}: unknown control member")
                if parts[1] in control:
                    reject(f"duplicate member {member.name!r}")
                control[parts[1]] = tar.extractfile(member).read()
                continue
            path = WORKSPACE
            for part in parts[:-1]:
                path = os.path.join(path, part)
                make_dir(path)
            path = os.path.join(path, parts[-1])
            if member.isdir():
                make_dir(path)
                continue
            if member.name in seen:
                reject(f"duplicate member {member.name!r}")
            seen.add(member.name)
            try:
                write_file(path, tar.extractfile(member), replace)
            except FileExistsError:
                reject(f"duplicate member {member.name!r}")
            seen_main = seen_main or member.name == "main.py"
    if not seen_main:
        reject("bundle: no main.py")
    return control


def read_control(raw):
    if raw is None:
        return None
    if len(raw) > MAX_CONTROL_BYTES:
        reject("bundle: control file too large")
    try:
        control = json.loads(raw)
    except ValueError:
        reject("bundle: control file is not JSON")
    caps = ("max_files", "max_file_bytes", "max_total_bytes")
    watchdog = control.get("watchdog_seconds") if isinstance(control, dict) else None
    if (
        not isinstance(control, dict)
        or not isinstance(control.get("nonce"), str)
        or not re.fullmatch(r"[0-9a-f]{32}", control["nonce"])
        or not isinstance(control.get("out_dir"), str)
        or not control["out_dir"].startswith(WORKSPACE + "/")
        or any(type(control.get(cap)) is not int or control[cap] < 0 for cap in caps)
        or (watchdog is not None and (type(watchdog) is not int or watchdog <= 0))
        or ("result_cap" in control and (type(control["result_cap"]) is not int
                                         or control["result_cap"] < 64))
    ):
        reject("bundle: control file is malformed")
    return control


class Deadline:
    """Ends the sandbox when its time is up, should the server die before its own timer can: a
    thread of PID 1 SIGKILLs every other process, then PID 1 exits 137. No signal is involved,
    so nothing the program sends can set it off early or hold it back."""

    def __init__(self, seconds):
        self._at = time.monotonic() + seconds if seconds else None
        self._changed = threading.Condition()
        threading.Thread(target=self._watch, daemon=True).start()

    def shorten(self, seconds):
        with self._changed:
            at = time.monotonic() + seconds
            self._at = at if self._at is None else min(self._at, at)
            self._changed.notify()

    def _watch(self):
        with self._changed:
            while self._at is None or time.monotonic() < self._at:
                self._changed.wait(None if self._at is None else self._at - time.monotonic())
        end_every_process()
        os._exit(128 + signal.SIGKILL)


def ignore_signals():
    """PID 1 handles no signal, so the kernel drops those sent from inside the sandbox."""
    for number in signal.valid_signals():
        if number not in (signal.SIGKILL, signal.SIGSTOP, signal.SIGCHLD):
            try:
                signal.signal(number, signal.SIG_IGN)
            except (OSError, ValueError):
                pass


def default_signals():
    """In the child: undoes ignore_signals(), since an ignored signal stays ignored across exec."""
    for number in signal.valid_signals():
        if number not in (signal.SIGKILL, signal.SIGSTOP):
            try:
                signal.signal(number, signal.SIG_DFL)
            except (OSError, ValueError):
                pass


def confine():
    """In the child before exec: a seccomp filter for the program and everything it starts. It
    refuses what no Python program needs and what would let it reach PID 1 or run bytes it wrote:
    ptrace; reading or writing another process's memory; memfd_create (an executable file no
    noexec mount covers); new user namespaces (under gVisor they would exempt it from the process
    cap); every signal addressed to PID 1, directly or as I/O notification (gVisor delivers those,
    Linux does not); setting extended attributes, which no Landlock right covers (on a file of
    the host's disk they would fill it past RLIMIT_FSIZE). clone3 answers ENOSYS, so the C library falls back to clone, whose flags the
    filter can read. Debian's python3-seccomp (libseccomp) builds the BPF for this architecture."""
    import seccomp

    rules = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
    refused = seccomp.ERRNO(errno.EPERM)
    for name in ("ptrace", "process_vm_readv", "process_vm_writev", "memfd_create", "unshare",
                 "setns", "tkill"):
        rules.add_rule(refused, name)
    # Extended attributes are data no mount flag or Landlock right covers: on a file an engine
    # mounts from the host's disk (the kubelet's termination log is mode 0666) they would fill
    # that disk past RLIMIT_FSIZE. No Python program needs to set them.
    for name in ("setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr",
                 "fremovexattr"):
        rules.add_rule(refused, name)
    for name in ("setxattrat", "removexattrat"):  # Linux 6.13: Debian's libseccomp lacks them
        try:
            rules.add_rule(refused, name)
        except RuntimeError:
            pass
    # A pid argument is an int: only its low 32 bits count (kill(1 + 2**32) is kill(1)).
    to_init = seccomp.Arg(0, seccomp.MASKED_EQ, 0xFFFFFFFF, 1)
    for name in ("kill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "pidfd_open"):
        rules.add_rule(refused, name, to_init)
    rules.add_rule(refused, "clone",
                   seccomp.Arg(0, seccomp.MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER))
    rules.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    f_setown, f_setsig, f_setown_ex = 8, 10, 15
    for owner in (1, 0xFFFFFFFF):  # PID 1, or its process group (-1)
        rules.add_rule(refused, "fcntl", seccomp.Arg(1, seccomp.EQ, f_setown),
                       seccomp.Arg(2, seccomp.MASKED_EQ, 0xFFFFFFFF, owner))
    for command in (f_setsig, f_setown_ex):
        rules.add_rule(refused, "fcntl", seccomp.Arg(1, seccomp.EQ, command))
    for request in (0x8901, 0x8902, 0x5410):  # FIOSETOWN, SIOCSPGRP, TIOCSPGRP
        rules.add_rule(refused, "ioctl", seccomp.Arg(1, seccomp.MASKED_EQ, 0xFFFFFFFF, request))
    rules.load()


def raise_oom_score():
    """In the child before exec: the OOM killer picks the program, not the launcher."""
    # A non-dumpable process's /proc files belong to root; the program has not started yet.
    ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
    try:
        with open("/proc/self/oom_score_adj", "w") as adj:
            adj.write("1000")
    except OSError:
        pass


def feed(fd, data):
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view[:CHUNK]):]
    except OSError:
        pass
    finally:
        os.close(fd)


def drain(fd, cap, sink):
    size = 0
    try:
        while data := os.read(fd, CHUNK):
            if size < cap:
                sink.append(data[: cap - size])
                size += len(sink[-1])
    except OSError:
        pass
    finally:
        os.close(fd)


def end_every_process():
    """SIGKILLs every process but PID 1 and reaps them until none is left: each process of the
    sandbox is a child of PID 1 once its parent is gone. kill(-1) reaches a thread group whose
    leader has exited, and stopped and traced processes; it is repeated for a child forked
    meanwhile. True when none is left within KILL_PATIENCE_SECONDS."""
    give_up = time.monotonic() + KILL_PATIENCE_SECONDS
    while True:
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0] != 0:
                pass
        except ChildProcessError:
            return True
        if time.monotonic() > give_up:
            return False
        time.sleep(0.001)


def wait_for(child):
    """Reaps every orphan until `child` ends; returns its wait status."""
    while True:
        pid, status = os.waitpid(-1, 0)
        if pid == child:
            return status


def clean(text):
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def read_exception(chunks):
    """The last complete record on the report pipe. It comes from inside the program's own
    process, so the program can write one too: it is kept only for a run that failed the way an
    uncaught exception fails (exit code 1, or SIGINT for KeyboardInterrupt)."""
    lines = b"".join(chunks).split(b"\n")
    try:
        record = json.loads(lines[-2] if len(lines) >= 2 else b"")
    except ValueError:
        return None
    keys = ("type", "message", "traceback")
    if not isinstance(record, dict) or not all(isinstance(record.get(k), str) for k in keys):
        return None
    return {k: clean(record[k])[:MAX_TEXT_BYTES] for k in keys}


def collect(out_dir, control, unchanged=None):
    """The regular files under out_dir, never following a symlink: ([(path, bytes)], omitted).
    With `unchanged` (a session's run: out_files_state() before it), only those it wrote."""
    files = []
    omitted = 0
    total = 0
    try:
        root = os.open(out_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return files, omitted
    try:
        for top, dirs, names, dir_fd in os.fwalk(".", dir_fd=root, follow_symlinks=False):
            dirs.sort()
            for name in sorted(names):
                try:
                    info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                except OSError:
                    continue
                if not stat.S_ISREG(info.st_mode):
                    continue
                key = os.path.normpath(os.path.join(top, name))
                if unchanged is not None and unchanged.get(key) == (
                        info.st_ino, info.st_mtime_ns, info.st_size):
                    continue
                size = info.st_size
                if (
                    len(files) >= control["max_files"]
                    or size > control["max_file_bytes"]
                    or total + size > control["max_total_bytes"]
                ):
                    omitted += 1
                    continue
                content = read_regular(name, dir_fd, control["max_file_bytes"])
                if content is None or total + len(content) > control["max_total_bytes"]:
                    omitted += 1
                    continue
                total += len(content)
                files.append((clean(os.path.normpath(os.path.join(top, name))), content))
    finally:
        os.close(root)
    return files, omitted


def read_regular(name, dir_fd, cap):
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        content = f.read(cap + 1)
    return content if len(content) <= cap else None


def write_all(data, fd=1):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def write_trailer(nonce, exit, exception, files, omitted, result=None, session_over=False):
    import fcntl

    # The program shares stdout's open file description and may have made it non-blocking.
    flags = fcntl.fcntl(1, fcntl.F_GETFL)
    fcntl.fcntl(1, fcntl.F_SETFL, flags & ~os.O_NONBLOCK)
    # Stderr first: the engine carries the two streams apart, and the core takes the trailer as
    # the end of everything only once stderr's end marker has arrived too.
    flags = fcntl.fcntl(2, fcntl.F_GETFL)
    fcntl.fcntl(2, fcntl.F_SETFL, flags & ~os.O_NONBLOCK)
    write_all(b"\0SCS-END-" + nonce.encode("ascii") + b"\0", fd=2)
    write_all(b"\n\0SCS-TRAILER-" + nonce.encode("ascii") + b"\0")
    write_all(b'{"exit":' + json.dumps(exit).encode("ascii") + b',"exception":'
              + json.dumps(exception).encode("ascii") + b',"files":[')
    for index, (path, content) in enumerate(files):
        head = json.dumps({"path": path, "size": len(content)})[:-1]
        write_all(
            (b"," if index else b"")
            + head.encode("ascii")
            + b',"content_base64":"'
            + base64.b64encode(content)
            + b'"}'
        )
    tail = {"files_truncated": omitted > 0, "files_omitted": omitted}
    if result is not None:
        tail["result"] = result
    if session_over:
        tail["session_over"] = True  # the interpreter is gone: the session ends with this run
    write_all(b"]," + json.dumps(tail)[1:].encode("ascii") + b"\n")


def exit_record(status):
    """How the program's process ended, from its wait status."""
    if os.WIFSIGNALED(status):
        return {"signal": os.WTERMSIG(status)}
    return {"code": os.waitstatus_to_exitcode(status)}


def exit_like(exit):
    """PID 1 cannot die by a signal it sends itself: death by signal N is exit code 128 + N."""
    os._exit(exit["code"] if "code" in exit else 128 + exit["signal"])


def start_child(warm):
    """The program's interpreter, started at once and held until main() says go. Its process
    leaves PID 1's session and process group, gets the signals' default actions back, offers
    itself to the OOM killer first, and is confined before it execs."""
    report_r, report_w = os.pipe()
    go_r, go_w = os.pipe()
    stdin_r, stdin_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            default_signals()
            os.dup2(stdin_r, 0)
            for fd in (report_r, go_w, stdin_r, stdin_w):
                os.close(fd)
            os.set_inheritable(report_w, True)
            os.set_inheritable(go_r, True)
            os.chdir(WORKSPACE)
            raise_oom_score()
            confine()
            os.execv(
                PYTHON, [PYTHON, "-I", "-c", BOOTSTRAP, str(report_w), str(go_r), ",".join(warm)]
            )
        except BaseException as error:  # nothing may return from here into PID 1's code
            os.write(2, f"sandbox launcher: rejected setup: {error}\n".encode("utf-8", "replace"))
        os._exit(125)
    for fd in (report_w, go_r, stdin_r):
        os.close(fd)
    return pid, report_r, go_w, stdin_w


# A session's interpreter: started once, it runs each run's /workspace/main.py in the one
# namespace of __main__ when PID 1 says so over the socket whose number is its first argument:
# a line of JSON ({"result_cap": N}) with, when the run has stdin, the read end of a pipe
# holding it. The value of a last expression statement that is not None comes back as its repr
# (cut to result_cap bytes, head and tail), as a notebook shows Out[n]. SIGINT is blocked but
# while a run executes: the interpreter says {"started": true} once it is unblocked, and PID 1
# interrupts a run only after that; one pending from a run already over is dropped first. After
# each run it flushes stdout and stderr and answers one line of JSON: {"exit": {"code": N},
# "exception": {...} or null, "result": text or null}. SystemExit ends only the run (its code
# is the run's exit code). The socket is in the program's own
# process, so the program can write such a line too: it can only misreport runs of its own
# session.
SESSION_BOOTSTRAP = EXCEPTION_RECORD + r"""
def _scs_session():
    import ast
    import json
    import os
    import signal
    import socket
    import sys

    channel = socket.socket(fileno=int(sys.argv[1]))
    channel.set_inheritable(False)
    namespace = sys.modules["__main__"].__dict__
    del namespace["_scs_session"]
    uncaught = namespace.pop("_scs_uncaught")
    path = "/workspace/main.py"
    sys.argv[:] = ["main.py"]
    sys.stdout.reconfigure(line_buffering=True)
    namespace["__file__"] = path
    namespace["__cached__"] = None
    interrupt = {signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, interrupt)

    def clean(text):
        return text.encode("utf-8", "replace").decode("utf-8")

    def cut(text, cap):
        data = text.encode("utf-8")
        if len(data) <= cap:
            return text
        half = cap // 2
        omitted = len(data) - 2 * half
        return (data[:half].decode("utf-8", "ignore") + f"\n[... {omitted} bytes omitted ...]\n"
                + data[-half:].decode("utf-8", "ignore"))


    def run(command):
        outcome = {"exit": {"code": 0}, "exception": None, "result": None}
        while signal.sigtimedwait(interrupt, 0) is not None:
            pass  # meant for a run that is over
        signal.signal(signal.SIGINT, signal.default_int_handler)  # the code may have changed it
        channel.sendall(b'{"started": true}\n')
        try:
            try:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, interrupt)
                with open(path, "rb") as source:
                    tree = ast.parse(source.read(), path)
                last = None
                if tree.body and isinstance(tree.body[-1], ast.Expr):
                    last = ast.Expression(tree.body.pop().value)
                body = compile(tree, path, "exec", dont_inherit=True)
                tail = compile(last, path, "eval", dont_inherit=True) if last else None
                exec(body, namespace)
                value = eval(tail, namespace) if tail else None
                if value is not None:
                    outcome["result"] = cut(clean(repr(value)), command["result_cap"])
            finally:
                signal.pthread_sigmask(signal.SIG_BLOCK, interrupt)
        except SystemExit as error:
            code = error.code
            if code is None or isinstance(code, int):
                outcome["exit"] = {"code": (code or 0) & 0xFF}
            else:
                print(code, file=sys.stderr)
                outcome["exit"] = {"code": 1}
        except BaseException as error:
            outcome["exit"] = {"code": 1}
            outcome["exception"] = uncaught(error, path)
        signal.pthread_sigmask(signal.SIG_BLOCK, interrupt)
        return outcome

    while True:
        message, fds, _, _ = socket.recv_fds(channel, 1 << 16, 1)
        if not message:
            os._exit(0)
        null = os.open("/dev/null", os.O_RDONLY)
        os.dup2(fds[0] if fds else null, 0)
        for fd in fds + [null]:
            os.close(fd)
        sys.stdin = open(0, "r", closefd=False)
        outcome = run(json.loads(message))
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:
                pass
        channel.sendall(json.dumps(outcome).encode("ascii") + b"\n")


_scs_session()
"""


def start_session_child():
    """A session's interpreter (SESSION_BOOTSTRAP), confined as start_child()'s is, with one
    end of a socket pair to PID 1."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            default_signals()
            null = os.open("/dev/null", os.O_RDONLY)
            os.dup2(null, 0)
            os.close(null)
            ours.close()
            theirs.set_inheritable(True)
            os.chdir(WORKSPACE)
            raise_oom_score()
            confine()
            os.execv(PYTHON, [PYTHON, "-I", "-c", SESSION_BOOTSTRAP, str(theirs.fileno())])
        except BaseException as error:  # nothing may return from here into PID 1's code
            os.write(2, f"sandbox launcher: rejected setup: {error}\n".encode("utf-8", "replace"))
        os._exit(125)
    theirs.close()
    return pid, ours


def read_line(stream, limit=64):
    """One "\\n"-terminated line from the raw stream, read a byte at a time (no read-ahead)."""
    line = b""
    while not line.endswith(b"\n"):
        byte = stream.read(1)
        if not byte:
            return None
        line += byte
        if len(line) > limit:
            reject("session: a frame header is too long")
    return line[:-1]


def read_exactly(stream, size):
    data = bytearray()
    while len(data) < size:
        chunk = stream.read(min(CHUNK, size - len(data)))
        if not chunk:
            reject("session: stdin ended inside a frame")
        data += chunk
    return bytes(data)


def session_main(seconds):
    """A session: one interpreter for every run, until stdin ends, the interpreter dies or the
    deadline passes. Each run frame is unpacked over /workspace (files of earlier runs stay; a
    file sent again is replaced) and run by the interpreter; its trailer reports the files
    under the out directory written since the run began. Processes the code starts live on
    between runs. Stdin ending ends the session; the interpreter ending (os._exit, a signal,
    the OOM killer) ends it too, with a last trailer for the run it was in."""
    import io
    import queue

    deadline = Deadline(seconds)
    del deadline  # its thread holds it
    child, channel = start_session_child()
    events = queue.Queue()
    lock = threading.Lock()
    # A run's interpreter has said it started (SIGINT reaches its code now); an interrupt came
    # for the run whose frame was read last before it did.
    state = {"running": False, "pending": False}

    def interrupt_now():
        try:
            os.kill(child, signal.SIGINT)
        except ProcessLookupError:
            pass

    def read_frames():
        stream = sys.stdin.buffer.raw
        while (header := read_line(stream)) is not None:
            if header == b"SCS-INTERRUPT":
                with lock:
                    if state["running"]:
                        interrupt_now()
                    else:
                        state["pending"] = True
                continue
            kind, _, size = header.partition(b" ")
            if kind != b"SCS-RUN" or not size.isdigit() or int(size) > 1 << 31:
                reject(f"session: unknown frame {header[:32]!r}")
            bundle = read_exactly(stream, int(size))
            with lock:
                state["pending"] = False  # an interrupt read before this frame was an older run's
            events.put(("run", bundle))
        events.put(("end", None))

    def reap():
        while True:
            try:
                pid, status = os.waitpid(-1, 0)
            except ChildProcessError:
                time.sleep(0.05)
                continue
            if pid == child:
                events.put(("died", status))

    def answers():
        buffered = bytearray()
        while chunk := channel.recv(CHUNK):
            buffered += chunk
            while (end := buffered.find(b"\n")) >= 0:
                line = bytes(buffered[:end])
                del buffered[: end + 1]
                if line == b'{"started": true}':
                    with lock:
                        state["running"] = True
                        if state["pending"]:
                            state["pending"] = False
                            interrupt_now()
                else:
                    events.put(("answer", line))
            if len(buffered) > MAX_ANSWER_BYTES:
                buffered.clear()  # no line of the interpreter's is this long: the program's
                events.put(("answer", b""))

    for target in (read_frames, reap, answers):
        threading.Thread(target=target, daemon=True).start()

    def finish(status):
        end_every_process()
        exit_like(exit_record(status))

    while True:
        kind, value = events.get()
        if kind == "died":
            finish(value)
        if kind == "end":
            end_every_process()
            os._exit(0)
        if kind != "run":
            continue  # an answer outside a run: the program's own line
        members = unpack(io.BytesIO(value), replace=True)
        control = read_control(members.get("control.json"))
        if control is None:
            reject("session: a run without its control file")
        out_dir = control["out_dir"]
        try:
            os.mkdir(out_dir, 0o755)
        except FileExistsError:
            pass
        before = out_files_state(out_dir)
        stdin_data = members.get("stdin")
        fds = []
        if stdin_data is not None:
            stdin_r, stdin_w = os.pipe()
            threading.Thread(target=feed, args=(stdin_w, stdin_data), daemon=True).start()
            fds = [stdin_r]
        result_cap = control.get("result_cap", 1 << 16)
        command = json.dumps({"result_cap": result_cap}).encode("ascii")
        try:
            socket.send_fds(channel, [command], fds)
        except OSError:
            pass  # the interpreter is gone: the reaper says so
        for fd in fds:
            os.close(fd)
        while True:
            kind, value = events.get()
            if kind in ("answer", "died", "end"):
                break
        with lock:
            state["running"] = False
        files, omitted = collect(out_dir, control, unchanged=before)
        over = kind != "answer"
        if kind == "answer":
            answer = read_answer(value, result_cap)
            exit, exception, result = answer["exit"], answer["exception"], answer["result"]
        else:
            exit = exit_record(value) if kind == "died" else {"signal": signal.SIGKILL}
            exception, result = None, None
        try:
            write_trailer(control["nonce"], exit, exception, files, omitted, result, over)
        except OSError:
            pass
        if kind == "died":
            finish(value)
        if kind == "end":
            end_every_process()
            os._exit(0)


def read_answer(line, result_cap):
    """The interpreter's account of a run, checked: anything malformed is a failed run."""
    try:
        answer = json.loads(line)
    except ValueError:
        answer = None
    failed = {"exit": {"code": 1}, "exception": None, "result": None}
    if not isinstance(answer, dict):
        return failed
    exit = answer.get("exit")
    if not (isinstance(exit, dict) and type(exit.get("code")) is int and 0 <= exit["code"] < 256):
        return failed
    exception = answer.get("exception")
    keys = ("type", "message", "traceback")
    if not (exception is None or (isinstance(exception, dict)
                                  and all(isinstance(exception.get(k), str) for k in keys))):
        exception = None
    if exception is not None:
        exception = {k: clean(exception[k])[:MAX_TEXT_BYTES] for k in keys}
    result = answer.get("result")
    if isinstance(result, str):
        result = clean(result).encode("utf-8")[:result_cap + 64].decode("utf-8", "ignore")
    else:
        result = None
    return {"exit": {"code": exit["code"]}, "exception": exception, "result": result}


def out_files_state(out_dir):
    """What is under out_dir now, to tell later which files a run wrote or changed:
    {path: (inode, mtime_ns, size)} of its regular files, never following a symlink."""
    state = {}
    try:
        root = os.open(out_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return state
    try:
        for top, dirs, names, dir_fd in os.fwalk(".", dir_fd=root, follow_symlinks=False):
            for name in names:
                try:
                    info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISREG(info.st_mode):
                    state[os.path.normpath(os.path.join(top, name))] = (
                        info.st_ino, info.st_mtime_ns, info.st_size)
    finally:
        os.close(root)
    return state


MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


# The resource limits `--rlimits` names, and the rlimit each lowers.
RLIMITS = {
    "nproc": resource.RLIMIT_NPROC,
    "nofile": resource.RLIMIT_NOFILE,
    "fsize": resource.RLIMIT_FSIZE,
    "core": resource.RLIMIT_CORE,
}


def is_whole(text):
    """Only ASCII digits: str.isdigit() also takes "²", which int() refuses."""
    return text.isascii() and text.isdigit()


def parse_rlimits(text):
    """`nproc=256,nofile=1024,fsize=268435456,core=0`: each named once, a whole number. None
    when malformed."""
    limits = {}
    for item in text.split(","):
        name, _, value = item.partition("=")
        if name not in RLIMITS or name in limits or not is_whole(value):
            return None
        limits[name] = int(value)
    return limits


def parse_paths(text):
    """`/proc/keys,/sys/firmware`: absolute paths, comma-separated. None when malformed."""
    paths = text.split(",")
    if not all(p.startswith("/") and "\0" not in p for p in paths):
        return None
    return paths


def parse_arguments(argv):
    """`--deadline SECONDS`: the sandbox ends at most this long after it started. `--warm
    MODULE,...`: the modules the program's interpreter imports while it waits for the code.
    For an engine that cannot set or show them (a Kubernetes Pod): `--rlimits NAME=N,...`,
    resource limits to lower itself to before anything else; `--masked PATH,...` and `--readonly
    PATH,...`, paths to find masked and read-only before anything else; `--confine`, the
    Landlock rules of confine_filesystem(). `--session`: a session's sandbox. In any order. Returns them as attributes (deadline None when not given)."""
    parsers = {
        "deadline": lambda v: int(v) if is_whole(v) and int(v) > 0 else None,
        "warm": lambda v: (v.split(",") if all(MODULE_NAME.fullmatch(m) for m in v.split(","))
                           else None),
        "rlimits": parse_rlimits,
        "masked": parse_paths,
        "readonly": parse_paths,
    }
    given = {"deadline": None, "warm": [], "session": False, "confine": False, "rlimits": {},
             "masked": [], "readonly": []}
    rest = list(argv)
    while rest:
        flag = rest.pop(0)
        name = flag[2:] if flag.startswith("--") else ""
        if name in ("session", "confine"):
            given[name] = True
            continue
        if not rest:
            reject(f"setup: arguments {argv!r}: {flag!r} needs a value")
        value = rest.pop(0)
        parsed = parsers[name](value) if name in parsers else None
        if parsed is None:
            reject(f"setup: arguments {argv!r}: want --deadline SECONDS [--warm MODULE,...]"
                   " [--rlimits NAME=N,...] [--masked PATH,...] [--readonly PATH,...]"
                   " [--confine] [--session]")
        given[name] = parsed
    return types.SimpleNamespace(**given)


def check_masked(paths):
    """Each path is masked, as runc masks one: absent, an empty directory (a tmpfs over it), or
    a file that reads nothing (/dev/null over it). Anything else ends the sandbox (125) before
    any code runs: the engine was asked to mask it and did not."""
    for path in paths:
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                if os.listdir(path):
                    reject(f"setup: {path} is not masked: the directory has entries")
                continue
            with open(path, "rb") as masked:
                if masked.read(1):
                    reject(f"setup: {path} is not masked: it reads")
        except FileNotFoundError:
            continue
        except OSError as error:
            reject(f"setup: {path} is not masked: {error}")


def check_readonly(paths):
    """Each path is absent or on a read-only mount. gVisor answers ENOSYS to statfs in its own
    /proc (not the host's): there the check is that this uid cannot write it."""
    for path in paths:
        try:
            if os.statvfs(path).f_flag & os.ST_RDONLY:
                continue
            reject(f"setup: {path} is not read-only")
        except FileNotFoundError:
            continue
        except OSError as error:
            if error.errno == errno.ENOSYS and not os.access(path, os.W_OK):
                continue
            reject(f"setup: {path} is not read-only: {error}")


def lower_rlimits(limits):
    """Sets each limit, soft and hard, to N, or to the engine's hard limit where that is lower:
    PID 1 holds no capability, so no process of the sandbox can raise them again, and every
    process it starts inherits them (as runc applies an engine's ulimits)."""
    for name, value in limits.items():
        which = RLIMITS[name]
        _, hard = resource.getrlimit(which)
        cap = value if hard == resource.RLIM_INFINITY else min(value, hard)
        try:
            resource.setrlimit(which, (cap, cap))
        except (OSError, ValueError) as error:
            reject(f"setup: cannot lower {name} to {cap}: {error}")


# Landlock (linux/landlock.h): syscall numbers, the rights this launcher handles, and where it
# grants them. The numbers are the same on every architecture.
LANDLOCK_CREATE_RULESET, LANDLOCK_ADD_RULE, LANDLOCK_RESTRICT_SELF = 444, 445, 446
LANDLOCK_CREATE_RULESET_VERSION = 1
LANDLOCK_RULE_PATH_BENEATH = 1
FS_EXECUTE, FS_WRITE_FILE, FS_MAKE_CHAR, FS_MAKE_BLOCK = 1 << 0, 1 << 1, 1 << 6, 1 << 11
FS_TRUNCATE = 1 << 14  # Landlock ABI 3 (Linux 6.2)
PR_SET_NO_NEW_PRIVS = 38
EXECUTABLE_TREE = "/usr"  # the image's programs and libraries, on its read-only root
SCRATCH = (WORKSPACE, "/tmp", "/dev/shm")
# procfs holds no file of a disk; the program's interpreter writes its own oom_score_adj there
# (raise_oom_score()).
WRITABLE_PSEUDO = ("/proc",)
# Devices a program opens for writing by name; /dev/pts holds the ptys os.openpty() makes.
WRITABLE_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom",
                    "/dev/tty", "/dev/ptmx", "/dev/pts")


class _PathBeneath(ctypes.Structure):
    _pack_ = 1  # struct landlock_path_beneath_attr is packed
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def confine_filesystem():
    """`--confine`, for an engine whose scratch mounts take no noexec, nosuid or nodev and which
    mounts a writable file of the host's disk into the sandbox (a Kubernetes Pod's emptyDirs and
    its /dev/termination-log and /etc/hosts). Before anything else runs, PID 1 restricts itself,
    and so every process the sandbox will ever have, with Landlock: files execve only from
    beneath /usr (so no binary or script written to scratch space runs, setuid or not; a
    dropped file can still be mapped executable, docs/SECURITY.md 2b); files open for
    writing only beneath /workspace, /tmp, /dev/shm and /proc (the program's own oom_score_adj)
    and at the devices above (so no file of the host's disk is written; the program's filter,
    confine(), refuses extended attributes); no character or block device is made anywhere. Kernels without
    Landlock (gVisor answers ENOSYS) end the sandbox with 125: refused, never weakened."""
    libc = ctypes.CDLL(None, use_errno=True)
    syscall = libc.syscall
    syscall.restype = ctypes.c_long
    abi = syscall(LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0),
                  ctypes.c_uint32(LANDLOCK_CREATE_RULESET_VERSION))
    if abi < 1:
        reject(f"setup: --confine: Landlock is unavailable: {os.strerror(ctypes.get_errno())}")
    writes = FS_WRITE_FILE | (FS_TRUNCATE if abi >= 3 else 0)
    handled = ctypes.c_uint64(FS_EXECUTE | writes | FS_MAKE_CHAR | FS_MAKE_BLOCK)
    ruleset = syscall(LANDLOCK_CREATE_RULESET, ctypes.byref(handled),
                      ctypes.c_size_t(ctypes.sizeof(handled)), ctypes.c_uint32(0))
    if ruleset < 0:
        reject(f"setup: --confine: landlock_create_ruleset: {os.strerror(ctypes.get_errno())}")

    def grant(path, access, required):
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except FileNotFoundError:
            if required:
                reject(f"setup: --confine: {path} is missing")
            return
        rule = _PathBeneath(access, fd)
        done = syscall(LANDLOCK_ADD_RULE, ctypes.c_int(ruleset),
                       ctypes.c_int(LANDLOCK_RULE_PATH_BENEATH), ctypes.byref(rule),
                       ctypes.c_uint32(0))
        error = ctypes.get_errno()
        os.close(fd)
        if done != 0:
            reject(f"setup: --confine: landlock_add_rule {path}: {os.strerror(error)}")

    grant(EXECUTABLE_TREE, FS_EXECUTE, True)
    for path in SCRATCH + WRITABLE_PSEUDO:
        grant(path, writes, True)
    for path in WRITABLE_DEVICES:
        grant(path, writes, False)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        reject(f"setup: --confine: PR_SET_NO_NEW_PRIVS: {os.strerror(ctypes.get_errno())}")
    if syscall(LANDLOCK_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
        reject(f"setup: --confine: landlock_restrict_self: {os.strerror(ctypes.get_errno())}")
    os.close(ruleset)


def main():
    make_undumpable()
    ignore_signals()
    os.umask(0o022)
    setup = parse_arguments(sys.argv[1:])
    lower_rlimits(setup.rlimits)
    check_masked(setup.masked)
    check_readonly(setup.readonly)
    if setup.confine:
        confine_filesystem()
    seconds, warm, session = setup.deadline, setup.warm, setup.session
    if session:
        os.chdir(WORKSPACE)
        session_main(seconds)
    deadline = Deadline(seconds)
    child, report_r, go_w, stdin_w = start_child(warm)
    try:
        # Unbuffered, so that the end-of-archive block is seen even while stdin stays open.
        members = unpack(sys.stdin.buffer.raw)
    except (tarfile.TarError, OSError, EOFError, UnicodeError) as error:
        reject(f"bundle: {error}")
    control = read_control(members.get("control.json"))
    if control and control.get("watchdog_seconds"):
        deadline.shorten(control["watchdog_seconds"])
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.chdir(WORKSPACE)
    out_dir = control["out_dir"] if control else WORKSPACE + "/out"
    try:
        os.mkdir(out_dir, 0o755)
    except FileExistsError:
        pass  # sent in `files`; collect() takes it only if it is a directory

    stdin_data = members.get("stdin")
    threads = []
    if stdin_data is None:
        os.close(stdin_w)
    else:
        threads.append(threading.Thread(target=feed, args=(stdin_w, stdin_data), daemon=True))
    os.write(go_w, b"0" if stdin_data is None else b"1")
    os.close(go_w)
    chunks = []
    threads.append(
        threading.Thread(target=drain, args=(report_r, MAX_EXCEPTION_BYTES, chunks), daemon=True)
    )
    for thread in threads:
        thread.start()
    exit = exit_record(wait_for(child))

    end_every_process()
    for thread in threads:
        thread.join(KILL_PATIENCE_SECONDS)
    if control:
        files, omitted = collect(out_dir, control)
        failed_as_uncaught = exit in ({"code": 1}, {"signal": signal.SIGINT})
        exception = read_exception(chunks) if failed_as_uncaught else None
        try:
            write_trailer(control["nonce"], exit, exception, files, omitted)
        except OSError:
            pass
    exit_like(exit)


if __name__ == "__main__":
    main()
