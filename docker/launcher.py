"""Sandbox launcher: unpack the run's bundle from stdin into /workspace, run main.py, report.

Runs as uid 10001 under `python3 -I`, before any user code. The bundle is an uncompressed ustar
built by the server; it is checked again here because Docker's own extraction trusts tar headers.
Only regular files and directories are accepted, with fixed modes and no links of any kind.
Any violation exits 125 with "sandbox launcher: rejected <why>" on stderr.

Members under .scs/ configure the launcher and are never written to disk: control.json (a
per-run nonce, the caps on returned files and the run's watchdog) and stdin. The launcher makes
itself non-dumpable first, so the program, which has the same uid, cannot read its memory
through /proc. It runs the program as its child, as `python3 -I main.py` would run it, except
that stdout is line-buffered and an uncaught exception is also reported over a pipe; that child
interpreter is started before the bundle is read (in a sandbox prepared ahead of its run, long
before) and runs nothing until the bundle has passed every check. When the child ends, the
launcher kills every other process of the sandbox, collects the regular files under
/workspace/out, writes to stdout "\\n\\0SCS-TRAILER-<nonce>\\0", one line of JSON and "\\n" (the
server strips it from the output), and exits as the child did.
"""

import base64
import ctypes
import json
import os
import re
import signal
import stat
import subprocess
import sys
import tarfile
import threading
import time

WORKSPACE = "/workspace"
MAIN = "/workspace/main.py"
CONTROL_DIR = ".scs"
ALLOWED_TYPES = (tarfile.REGTYPE, tarfile.AREGTYPE, tarfile.DIRTYPE)
CHUNK = 1 << 16
MAX_CONTROL_BYTES = 1 << 16
MAX_EXCEPTION_BYTES = 1 << 16
MAX_TEXT_BYTES = 8 << 10
PR_SET_DUMPABLE = 4
KILL_PATIENCE_SECONDS = 5

# The child: `python3 -I main.py` with a report of an uncaught exception. It is started before
# the code arrives (its interpreter start-up is off the run's path) and waits for one byte on
# the go pipe: "0" runs main.py with stdin on /dev/null, "1" with the stdin pipe, nothing (the
# launcher gave up) exits. The two functions remove their names first, so main.py starts with
# the namespace it would have.
BOOTSTRAP = r"""
def _scs_run():
    import os
    import sys

    fd = int(sys.argv[1])
    go = int(sys.argv[2])
    os.set_inheritable(fd, False)
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
    namespace = sys.modules["__main__"].__dict__
    del namespace["_scs_run"]
    report = namespace.pop("_scs_report")
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
        tb = error.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != path:
            tb = tb.tb_next
        error.__traceback__ = tb
        try:
            sys.excepthook(type(error), error, tb)
        except BaseException:
            sys.__excepthook__(type(error), error, tb)
        if os.getpid() == owner:
            report(fd, error, tb)
        if isinstance(error, KeyboardInterrupt):
            import signal
            sys.stdout.flush()
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        raise SystemExit(1)


def _scs_report(fd, error, tb):
    import json
    import os
    import traceback

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
    record = {"type": clean(name), "message": clean(message[:8192]), "traceback": text}
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


def write_file(path, source):
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    with os.fdopen(fd, "wb") as out:
        while chunk := source.read(CHUNK):
            out.write(chunk)


def unpack(stream):
    """Writes the bundle to /workspace; returns the .scs/ members, kept in memory."""
    seen_main = False
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
            try:
                write_file(path, tar.extractfile(member))
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
    ):
        reject("bundle: control file is malformed")
    return control


def arm_watchdog(seconds):
    """Ends the sandbox `seconds` after its code arrived, should the server die before its own
    timer can. A sandbox prepared ahead of need started long before its code, so the outer
    `timeout` also allows for that wait; this alarm counts from the code. It SIGKILLs every
    process this uid may signal, that `timeout` included, so tini and the container end (exit
    137, as from `timeout`). Killing the launcher instead ends `timeout`'s child: the same."""

    def expire(signum, frame):
        os.kill(-1, signal.SIGKILL)
        os._exit(128 + signal.SIGKILL)

    signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)


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


def stat_fields(pid):
    """State and parent of a process, from /proc/<pid>/stat; None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return fields[0], int(fields[1])
    except (OSError, IndexError, ValueError):
        return None


def kill_others():
    """SIGKILLs every process of the sandbox except this one and its ancestors (the init and
    the watchdog `timeout`), until none is left alive."""
    keep = {1, os.getpid()}
    pid = os.getpid()
    while pid > 1:
        fields = stat_fields(pid)
        if fields is None:
            break
        pid = fields[1]
        keep.add(pid)
    deadline = time.monotonic() + KILL_PATIENCE_SECONDS
    while True:
        victims = []
        for name in os.listdir("/proc"):
            if name.isdigit() and int(name) not in keep:
                fields = stat_fields(int(name))
                if fields is not None and fields[0] not in (b"Z", b"X"):
                    victims.append(int(name))
        if not victims or time.monotonic() > deadline:
            return
        for victim in victims:
            try:
                os.kill(victim, signal.SIGKILL)
            except ProcessLookupError:
                pass
            except PermissionError:
                keep.add(victim)
        time.sleep(0.01)


def clean(text):
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def read_exception(chunks):
    try:
        record = json.loads(b"".join(chunks).split(b"\n", 1)[0])
    except ValueError:
        return None
    keys = ("type", "message", "traceback")
    if not isinstance(record, dict) or not all(isinstance(record.get(k), str) for k in keys):
        return None
    return {k: clean(record[k])[:MAX_TEXT_BYTES] for k in keys}


def collect(out_dir, control):
    """The regular files under out_dir, never following a symlink: ([(path, bytes)], omitted)."""
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


def write_all(data):
    view = memoryview(data)
    while view:
        view = view[os.write(1, view):]


def write_trailer(nonce, exception, files, omitted):
    import fcntl

    # The program shares stdout's open file description and may have made it non-blocking.
    flags = fcntl.fcntl(1, fcntl.F_GETFL)
    fcntl.fcntl(1, fcntl.F_SETFL, flags & ~os.O_NONBLOCK)
    write_all(b"\n\0SCS-TRAILER-" + nonce.encode("ascii") + b"\0")
    write_all(b'{"exception":' + json.dumps(exception).encode("ascii") + b',"files":[')
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
    write_all(b"]," + json.dumps(tail)[1:].encode("ascii") + b"\n")


def exit_like(returncode):
    if returncode >= 0:
        os._exit(returncode)
    number = -returncode
    try:
        signal.signal(number, signal.SIG_DFL)
    except (OSError, ValueError):
        pass
    os.kill(os.getpid(), number)
    os._exit(128 + number)  # the signal's default action is not to end a process


def start_child():
    """The program's interpreter, started at once and held until run_child()."""
    report_r, report_w = os.pipe()
    go_r, go_w = os.pipe()
    stdin_r, stdin_w = os.pipe()
    try:
        child = subprocess.Popen(
            ["/usr/bin/python3", "-I", "-c", BOOTSTRAP, str(report_w), str(go_r)],
            stdin=stdin_r,
            pass_fds=(report_w, go_r),
            cwd=WORKSPACE,
            preexec_fn=raise_oom_score,
        )
    except OSError as error:
        reject(f"setup: cannot start python: {error}")
    for fd in (report_w, go_r, stdin_r):
        os.close(fd)
    return child, report_r, go_w, stdin_w


def main():
    make_undumpable()
    os.umask(0o022)
    child, report_r, go_w, stdin_w = start_child()
    try:
        # Unbuffered, so that the end-of-archive block is seen even while stdin stays open.
        members = unpack(sys.stdin.buffer.raw)
    except (tarfile.TarError, OSError, EOFError, UnicodeError) as error:
        reject(f"bundle: {error}")
    control = read_control(members.get("control.json"))
    if control and control.get("watchdog_seconds"):
        arm_watchdog(control["watchdog_seconds"])
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
    returncode = child.wait()

    kill_others()
    for thread in threads:
        thread.join(KILL_PATIENCE_SECONDS)
    if control:
        files, omitted = collect(out_dir, control)
        try:
            write_trailer(control["nonce"], read_exception(chunks), files, omitted)
        except OSError:
            pass
    exit_like(returncode)


if __name__ == "__main__":
    main()
