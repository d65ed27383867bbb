"""A session's interpreter: started once, it runs each run's /workspace/main.py in the one
namespace of __main__, as a notebook runs its cells, when PID 1 says so.

`python3 -I -c STUB ROOT scs_launcher.child.session CHANNEL_FD`. The channel is a SOCK_SEQPACKET
socket to PID 1, which takes a message only when the kernel's credentials on it name this
process: a process the code forked, or one that took the descriptor, cannot answer for a run.
PID 1 sends {"run": N, "result_cap": BYTES}, with the read end of a pipe holding the run's stdin
when it has one. The interpreter says {"started": N} once SIGINT reaches the code (it is blocked
outside runs, so an interrupt never lands in this module's own work; one pending from a run
already over is dropped first), runs the code, and answers {"run": N, "exit": {"code": C},
"exception": {...} or null, "result": text or null}, once stdout and stderr are flushed, as the
channel's grammar says (scs_launcher/channel.py, whose codec this module speaks with). The value
of a last expression statement that is not None comes back as its repr, cut to result_cap bytes
(head and tail), whatever the object does.
SystemExit ends only the run (its code is the run's exit code). A process forked by the code
never comes back here: when the code it inherited ends, it exits as a script would.

Children the code forked and never waited for stay zombies, each holding a place in the
session's process cap, as in any long-lived Python process. Once REAP_AT of them wait, the
interpreter reaps, between runs, those that no subprocess or multiprocessing object of the code
waits for, so that they cannot use the cap up: a later os.waitpid() of such a pid gets
ChildProcessError. Fewer are left to the code, which may still wait for them."""

import ast
import ctypes
import os
import signal
import socket
import sys

from .. import channel
from . import program, record

PATH = "/workspace/main.py"
REAP_AT = 32

_compile = compile
_exec = exec
_eval = eval
_repr = repr
_open = open
_isinstance = isinstance
_type = type
_int = int
_len = len
_getpid = os.getpid


def cut(text, cap):
    """`text` (plain) within `cap` bytes of UTF-8: its head and tail around a marker."""
    data = record.utf8_bytes(text)
    if _len(data) <= cap:
        return text
    half = cap // 2
    omitted = _len(data) - 2 * half
    return (data[:half].decode("utf-8", "ignore") + f"\n[... {omitted} bytes omitted ...]\n"
            + data[-half:].decode("utf-8", "ignore"))


def flush_everything():
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass
    try:
        ctypes.CDLL(None).fflush(None)  # C code's stdio buffers too
    except BaseException:
        pass


def exit_code(error):
    """A SystemExit's exit code, as the interpreter's exit would make it."""
    code = error.code
    if code is None:
        return 0
    if _isinstance(code, _int):
        return code & 0xFF
    try:
        print(code, file=sys.stderr)
    except BaseException:
        pass
    return 1


class Interpreter:
    def __init__(self, channel_fd):
        self.channel = socket.socket(fileno=channel_fd)
        self.channel.set_inheritable(False)
        self.owner = _getpid()
        self.namespace = sys.modules["__main__"].__dict__
        self.interrupt = {signal.SIGINT}
        os.register_at_fork(after_in_child=self.forked)

    def forked(self):
        """In a process the code forked: it holds no channel to PID 1."""
        try:
            self.channel.close()
        except BaseException:
            pass

    def send(self, message):
        for piece in channel.pieces(message):
            self.channel.sendmsg([piece])

    def leave_if_forked(self, code):
        """A forked child that finished the code it inherited ends here, as a script would."""
        if _getpid() != self.owner:
            flush_everything()
            os._exit(code)

    def run(self, seq, result_cap):
        code, exception, result = 0, None, None
        while signal.sigtimedwait(self.interrupt, 0) is not None:
            pass  # meant for a run that is over
        signal.signal(signal.SIGINT, signal.default_int_handler)  # the code may have changed it
        self.send(channel.started(seq))
        try:
            try:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, self.interrupt)
                with _open(PATH, "rb") as source:
                    tree = ast.parse(source.read(), PATH)
                last = None
                if tree.body and _type(tree.body[-1]) is ast.Expr:
                    last = ast.Expression(tree.body.pop().value)
                body = _compile(tree, PATH, "exec", dont_inherit=True)
                tail = _compile(last, PATH, "eval", dont_inherit=True) if last else None
                _exec(body, self.namespace)
                value = _eval(tail, self.namespace) if tail else None
                if value is not None:
                    result = cut(record.plain(_repr(value)), result_cap)
            finally:
                signal.pthread_sigmask(signal.SIG_BLOCK, self.interrupt)
        except SystemExit as error:
            code = exit_code(error)
            self.leave_if_forked(code)
        except BaseException as error:
            exception = record.uncaught(error, PATH)
            self.leave_if_forked(1)
            code = 1
        self.leave_if_forked(0)
        signal.pthread_sigmask(signal.SIG_BLOCK, self.interrupt)
        return channel.answer(seq, code, exception, result)

    def serve(self):
        signal.pthread_sigmask(signal.SIG_BLOCK, self.interrupt)
        while True:
            try:
                message, fds, _, _ = socket.recv_fds(self.channel, 1 << 16, 1)
            except OSError:
                os._exit(0)
            except BaseException:
                continue  # raised by a signal handler the code left: its own, between runs
            if not message:
                os._exit(0)
            null = os.open("/dev/null", os.O_RDONLY)
            os.dup2(fds[0] if fds else null, 0)
            for fd in fds + [null]:
                os.close(fd)
            sys.stdin = _open(0, "r", closefd=False)
            seq, result_cap, environment = channel.read_command(message)
            os.environ.update(environment or {})  # egress's proxy variables
            outcome = self.run(seq, result_cap)
            flush_everything()
            reap_unclaimed_children()
            self.send(outcome)


def children_ended():
    """The pids of this process's children that have ended and wait to be reaped."""
    me = str(_getpid())
    ended = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return ended
    for name in names:
        if not name.isdigit():
            continue
        try:
            with _open(f"/proc/{name}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if _len(fields) > 1 and fields[0] == b"Z" and fields[1].decode() == me:
            ended.append(_int(name))
    return ended


def claimed_children():
    """The pids a subprocess.Popen or a multiprocessing process of the code will wait for."""
    claimed = set()
    processes = sys.modules.get("multiprocessing.process")
    if processes is not None:
        for child in list(getattr(processes, "_children", ())):
            popen = getattr(child, "_popen", None)
            if getattr(popen, "returncode", 0) is None:
                claimed.add(getattr(popen, "pid", None))
    subprocess = sys.modules.get("subprocess")
    if subprocess is not None:
        import gc

        for obj in gc.get_objects():
            if _isinstance(obj, subprocess.Popen) and obj.returncode is None:
                claimed.add(obj.pid)
    return claimed


def reap_unclaimed_children():
    try:
        ended = children_ended()
        if len(ended) < REAP_AT:
            return
        claimed = claimed_children()
        for pid in ended:
            if pid not in claimed:
                try:
                    os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    pass
    except BaseException:
        pass  # the code's objects are its own; reaping is only a courtesy


def main():
    root, channel_fd = sys.argv[1], _int(sys.argv[3])
    program.forget_launcher(root)
    program.use_packages(program.PACKAGES)
    sys.argv[:] = ["main.py"]
    sys.stdout.reconfigure(line_buffering=True)
    sys.stderr.reconfigure(line_buffering=True)
    namespace = sys.modules["__main__"].__dict__
    namespace["__file__"] = PATH
    namespace["__cached__"] = None
    Interpreter(channel_fd).serve()
