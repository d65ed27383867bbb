"""PID 1 for one run: the program's interpreter started at once (child/program.py), the bundle
read from stdin and checked, the code started, the program waited for while its stdin is fed
and its exception record read, then every process ended, the files collected and the trailer
written. PID 1 exits with the program's exit code, or 128 + N when signal N killed it."""

import os
import signal
import sys
import traceback

from . import bundle, files_out, processes, protocol, report
from .child import STUB
from .rejection import Rejected, reject

MAX_EXCEPTION_BYTES = 1 << 16


def serve(deadline, warm, root):
    loop = processes.Loop()
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
    try:
        # Unbuffered, so that the end-of-archive block is seen even while stdin stays open.
        members = bundle.unpack(sys.stdin.buffer.raw)
        control = bundle.read_control(members.get(protocol.CONTROL_FILE))
    except Rejected as why:
        reject(str(why))
    if control and control.get(protocol.CONTROL_WATCHDOG):
        deadline.shorten(control[protocol.CONTROL_WATCHDOG])
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    out_dir = control[protocol.CONTROL_OUT_DIR] if control else bundle.WORKSPACE + "/out"
    bundle.make_out_dir(out_dir)

    stdin_data = members.get(protocol.STDIN_FILE)
    try:
        os.write(go_w, b"0" if stdin_data is None else b"1")
    except OSError:
        pass  # its interpreter is gone (it said why on stderr): its exit says how
    os.close(go_w)
    feed = processes.Feed(loop, stdin_w, stdin_data or b"")
    exception_pipe = processes.Drain(loop, report_r, MAX_EXCEPTION_BYTES)
    try:
        loop.run(lambda: child in loop.exits)
        exit = report.exit_record(loop.exits[child])
        processes.end_every_process()
        feed.close()
        exception_pipe.ready(0)  # every writer has ended: to its end
        if control:
            files, omitted = files_out.collect(out_dir, control)
            failed_as_uncaught = exit in ({"code": 1}, {"signal": signal.SIGINT})
            exception = (report.last_exception_record(exception_pipe.chunks)
                         if failed_as_uncaught else None)
            warm = report.warm_seconds(exception_pipe.chunks)
            try:
                report.write_trailer(control[protocol.CONTROL_NONCE], exit, exception, files,
                                     omitted, extra={protocol.TRAILER_WARM_SECONDS: warm})
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
