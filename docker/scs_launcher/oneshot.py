"""PID 1 for one run: Python's interpreter started at once (child/program.py), the bundle read
from stdin and checked, the code started, the program waited for while its stdin is fed and its
exception record (and a JavaScript run's result) read, then every process ended, the files
collected and the trailer written. PID 1 exits with the program's exit code, or 128 + N when
signal N killed it. A run in another language (languages.py) ends the Python interpreter, which
has run no code, and starts its own once the bundle is read.

A prepared sandbox's stdin may begin with the session frame instead (protocol.py): then the
interpreter, which has imported modules but run no code, is ended, the deadline becomes the
session's and PID 1 serves a session (session.py) from there."""

import json
import os
import signal
import sys
import traceback

from . import bundle, files_out, frames, languages, processes, protocol, relay, report
from .child import STUB
from .rejection import Rejected, reject

MAX_REPORT_BYTES = 1 << 18  # the warm line, a result, an exception record: each capped
SESSION_PREFIX = (protocol.SESSION_FRAME + " ").encode("ascii")


class Prefixed:
    """A stream of `head` and then what `raw` reads: the bundle, whose first bytes were read to
    tell it from a session frame."""

    def __init__(self, head, raw):
        self.head, self.raw = head, raw

    def read(self, size=-1):
        if not self.head:
            return self.raw.read(size)
        size = len(self.head) if size is None or size < 0 else size
        data, self.head = self.head[:size], self.head[size:]
        return data


def read_head(fd):
    """The first bytes of `fd` (stdin), as many as the session frame's prefix (fewer only at
    its end)."""
    head = b""
    while len(head) < len(SESSION_PREFIX):
        data = os.read(fd, len(SESSION_PREFIX) - len(head))
        if not data:
            break
        head += data
    return head


def read_session_seconds(fd):
    """The rest of the session frame after its prefix, from `fd` (stdin): the session's
    deadline in seconds, read a byte at a time so that nothing of the frames after it is taken
    from stdin."""
    line = SESSION_PREFIX
    while not line.endswith(b"\n"):
        if len(line) > len(SESSION_PREFIX) + protocol.MAX_SESSION_SECONDS_DIGITS:
            raise Rejected("the session frame is too long")
        data = os.read(fd, 1)
        if not data:
            raise Rejected("stdin ended within the session frame")
        line += data
    parsed = frames.parse_header(line[:-1])
    if parsed is None or parsed[0].kind != frames.SESSION:
        seconds = line[len(SESSION_PREFIX):-1]
        raise Rejected(f"the session frame's deadline {seconds[:16]!r} is not whole seconds")
    return parsed[0].seconds


def become_session(loop, fds, deadline, seconds, root):
    """Ends the warm interpreter (no code has reached it), then serves a session with the
    session's deadline. Does not return."""
    processes.end_every_process()
    for fd in fds:
        os.close(fd)
    loop.close()
    deadline.restart(seconds)
    from . import session

    session.serve(root)


def start_python(loop, warm, root):
    """Python's interpreter, started ahead of the code (child/program.py). Returns its pid and
    PID 1's ends of its pipes: the report, the go byte, its stdin."""
    report_r, report_w = os.pipe()
    go_r, go_w = os.pipe()
    stdin_r, stdin_w = os.pipe()
    child = processes.spawn(
        [processes.PYTHON, "-I", "-c", STUB, root, "scs_launcher.child.program", str(report_w),
         str(go_r), ",".join(warm)],
        fds=[report_w, go_r], stdin_fd=stdin_r)
    loop.watch(child)
    for fd in (report_w, go_r, stdin_r):
        os.close(fd)
    return child, report_r, go_w, stdin_w


def switch_language(loop, started, language, root):
    """For a run in another language than Python: the warm interpreter, which has run no code,
    ended (what it reported of its warm imports kept), and the language's started. Returns the
    new child, its report pipe's read end (the warm line first), and its stdin's write end."""
    child, report_r, go_w, stdin_w = started
    processes.end_every_process()
    loop.unwatch(child)
    os.close(go_w)
    os.close(stdin_w)
    warm_line = b""
    while data := os.read(report_r, processes.CHUNK):  # its only writer is gone: to its end
        warm_line += data
    os.close(report_r)
    report_r, report_w = os.pipe()
    os.write(report_w, warm_line.split(b"\n", 1)[0] + b"\n")
    stdin_r, stdin_w = os.pipe()
    argv, fds = languages.run_argv(language, root, report_w)
    child = processes.spawn(argv, fds=fds, stdin_fd=stdin_r)
    loop.watch(child)
    os.close(report_w)
    os.close(stdin_r)
    return child, report_r, stdin_w


def serve(deadline, warm, root):
    loop = processes.Loop()
    started = start_python(loop, warm, root)
    child, report_r, go_w, stdin_w = started
    try:
        head = read_head(0)
        if head == SESSION_PREFIX:
            become_session(loop, (report_r, go_w, stdin_w), deadline,
                           read_session_seconds(0), root)
        # Unbuffered, so that the end-of-archive block is seen even while stdin stays open.
        members, names = bundle.unpack(Prefixed(head, sys.stdin.buffer.raw))
        control = bundle.read_control(members.get(protocol.CONTROL_FILE))
        language = languages.of(control)
        bundle.require_code(names, language)
        languages.check_interpreter(language)
    except Rejected as why:
        reject(str(why))
    if control and control.get(protocol.CONTROL_WATCHDOG):
        deadline.shorten(control[protocol.CONTROL_WATCHDOG])
    egress = bundle.egress_nonce(control)
    if egress is None:
        null = os.open("/dev/null", os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
    else:
        proxies = relay.proxy_environment(control)
        os.environ.update(proxies)  # for a language's interpreter, started next
    out_dir = control[protocol.CONTROL_OUT_DIR] if control else bundle.WORKSPACE + "/out"
    bundle.make_out_dir(out_dir)

    stdin_data = members.get(protocol.STDIN_FILE)
    if language == languages.PYTHON:
        # The go word says whether the run has stdin; with egress the proxy variables follow
        # it, as JSON, for the interpreter, started before they were known, to take.
        word = b"0" if stdin_data is None else b"1"
        if egress is not None:
            word += json.dumps(proxies).encode("ascii")
        try:
            os.write(go_w, word)
        except OSError:
            pass  # its interpreter is gone (it said why on stderr): its exit says how
        os.close(go_w)
    else:
        child, report_r, stdin_w = switch_language(loop, started, language, root)
    egress_relay = None
    if egress is not None:
        egress_relay = relay.Relay(loop, egress)
        relay.serve_stdin(loop, egress_relay)
    feed = processes.Feed(loop, stdin_w, stdin_data or b"")
    report_pipe = processes.Drain(loop, report_r, MAX_REPORT_BYTES)
    try:
        loop.run(lambda: child in loop.exits)
        exit = report.exit_record(loop.exits[child])
        processes.end_every_process()
        if egress_relay is not None:
            egress_relay.close()
        feed.close()
        report_pipe.ready(0)  # every writer has ended: to its end
        if control:
            files, omitted = files_out.collect(out_dir, control)
            chunks = report_pipe.chunks
            failed_as_uncaught = exit in ({"code": 1}, {"signal": signal.SIGINT})
            exception = report.last_exception_record(chunks) if failed_as_uncaught else None
            # Only runner.js writes results there; Python's interpreter never does.
            result = (report.last_result(chunks, control[protocol.CONTROL_RESULT_CAP])
                      if language == languages.JAVASCRIPT else None)
            extra = {protocol.TRAILER_RESULT: result,
                     protocol.TRAILER_WARM_SECONDS: report.warm_seconds(chunks)}
            try:
                report.write_trailer(control[protocol.CONTROL_NONCE], exit, exception, files,
                                     omitted, extra=extra)
            except OSError:
                pass
    except Exception:
        processes.end_every_process()
        if control:
            try:
                report.write_trailer(control[protocol.CONTROL_NONCE], None, extra={
                    protocol.TRAILER_LAUNCHER_ERROR: traceback.format_exc()[-4096:]})
            except OSError:
                pass
        os._exit(protocol.REJECTED_EXIT)
    report.exit_like(exit)
