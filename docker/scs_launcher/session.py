"""PID 1 for a session's sandbox: one interpreter for every run, until stdin ends, the interpreter
dies or the deadline passes: Python's (child/session.py), or the one of the language its first
run names (languages.py), a shell or Node.js, which reads its runs from a pipe.

Stdin carries frames (protocol.py). Each run's bundle is unpacked over /workspace (files of
earlier runs stay; a file sent again is replaced); one that cannot be placed (the code made a
directory where a file goes, filled the workspace) is that run's refusal, and the session goes
on. The interpreter's stdout and stderr are pipes to PID 1, which passes them on while a run is
in progress and drops them between runs, so PID 1 alone writes the sandbox's stdout: no process
the session left running can write into a trailer. The interpreter answers over a socket whose
messages carry the kernel's credentials; only its own count, and only for the run in progress.
The interpreter ending (os._exit, a signal, the OOM killer) ends the session, with a last
trailer for the run it was in."""

import io
import os
import signal
import socket
import struct
import tempfile
import traceback

from . import bundle, channel, files_out, frames, languages, processes, protocol, relay, report
from .child import STUB
from .rejection import Rejected, reject

CHUNK = 1 << 16
MAX_ANSWER_BYTES = 1 << 20  # far above what the interpreter writes: its texts are capped
MAX_DRAIN_BYTES = 16 << 20  # of a stream after the answer, should the session's processes write on
CREDENTIALS = struct.Struct("iII")


def read_answer(value, result_cap):
    """The interpreter's account of a run (its answer, channel.answer()), checked: anything
    malformed is a failed run."""
    failed = {"exit": {"code": 1}, "exception": None, "result": None}
    if not isinstance(value, dict):
        return failed
    exit = value.get(channel.EXIT)
    if not (isinstance(exit, dict) and type(exit.get(channel.CODE)) is int
            and 0 <= exit[channel.CODE] < 256):
        return failed
    exception = value.get(channel.EXCEPTION)
    return {"exit": {"code": exit[channel.CODE]}, "exception": report.exception_record(exception),
            "result": report.bounded_result(value.get(channel.RESULT), result_cap)}


class Run:
    def __init__(self, seq, control, before):
        self.seq = seq
        self.control = control
        self.before = before
        self.started = False
        self.interrupt = False  # asked for before the code started
        self.feed = None
        self.stdin_path = None  # a bash run's stdin, a file PID 1 wrote (Session.stdin_file)


class Session:
    def __init__(self, root):
        self.root = root
        self.loop = processes.Loop()
        self.loop.add(0, processes.READABLE, self.on_stdin)
        self.inbox = frames.Reader(kinds=(frames.RUN, frames.INTERRUPT, frames.EGRESS))
        self.frames = []
        self.answers = channel.Answers(MAX_ANSWER_BYTES)
        self.stdin_ended = False
        self.current = None
        self.seq = 0
        self.delivered = False  # a run has reached the interpreter
        self.relay = None  # egress (relay.py), from the first run whose control names it
        self.environment = None  # the proxy variables, for Python's interpreter's next run
        # Python's interpreter starts at once, so that a Python session's first run need not
        # wait for it; a session whose first run is in another language replaces it then.
        self.start_interpreter(languages.PYTHON)

    # The interpreter: started once, or replaced before the session's first run.

    def start_interpreter(self, language):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        ours.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        self.language = language
        self.commands = None  # bash's and javascript's runs: channel.command_line() on a pipe
        if language == languages.PYTHON:
            self.child = processes.spawn(
                [processes.PYTHON, "-I", "-c", STUB, self.root, "scs_launcher.child.session",
                 str(theirs.fileno())],
                fds=[theirs.fileno()], stdout_fd=out_w, stderr_fd=err_w)
        else:
            commands_r, self.commands = os.pipe()
            self.child = processes.spawn(languages.session_argv(language, self.root),
                                         stdout_fd=out_w, stderr_fd=err_w,
                                         at={channel.COMMAND_FD: commands_r,
                                             channel.ANSWER_FD: theirs.fileno()})
            os.close(commands_r)
        self.loop.watch(self.child)
        for fd in (out_w, err_w):
            os.close(fd)
        theirs.close()
        self.channel = ours
        self.channel.setblocking(False)
        self.streams = {out_r: 1, err_r: 2}
        for fd in self.streams:
            os.set_blocking(fd, False)
            self.loop.add(fd, processes.READABLE, lambda _, fd=fd: self.pump(fd))
        self.loop.add(self.channel.fileno(), processes.READABLE, self.on_channel)

    def replace_interpreter(self, language):
        """Before the session's first run (no code has reached the interpreter): the one started
        ended, the language's started instead."""
        processes.end_every_process()
        self.loop.unwatch(self.child)
        for fd in list(self.streams):
            self.loop.remove(fd)
            os.close(fd)
        self.loop.remove(self.channel.fileno())
        self.channel.close()
        if self.commands is not None:
            os.close(self.commands)
        self.start_interpreter(language)

    def deliver(self, run, stdin_r):
        """Hands the interpreter its run. Raises Rejected when it is not taking runs."""
        result_cap = run.control[protocol.CONTROL_RESULT_CAP]
        if self.commands is not None:
            try:
                os.write(self.commands, channel.command_line(run.seq, result_cap, run.stdin_path))
            except OSError:
                pass  # it is gone: the loop sees it end
            return
        command = channel.command(run.seq, result_cap, self.environment)
        self.environment = None
        try:
            socket.send_fds(self.channel, [command], [stdin_r])
        except BlockingIOError:
            raise Rejected("the session's interpreter is not taking runs") from None
        except OSError:
            pass  # it is gone: the loop sees it end

    # Stdin: frames from the server.

    def on_stdin(self, _):
        try:
            data = os.read(0, CHUNK)
        except OSError:
            data = b""
        if not data:
            self.stdin_ended = True
            self.loop.remove(0)
            return
        try:
            arrived = self.inbox.feed(data)
        except ValueError as why:
            reject(f"session: {why}")
        # In order: an interrupt is for the run whose frame came last before it.
        for frame in arrived:
            if frame.kind == frames.EGRESS:
                if self.relay is not None:
                    self.relay.on_frame(frame)
            elif frame.kind == frames.RUN:
                self.frames.append([frame.payload, False])
                self.next_run()
            elif self.frames:
                self.frames[-1][1] = True
            else:
                self.interrupt()

    def next_run(self):
        if self.current is None and self.frames:
            data, interrupted = self.frames.pop(0)
            self.begin(data)
            if interrupted and self.current is not None:
                self.current.interrupt = True

    def interrupt(self):
        """For the run in progress; one that comes between runs was meant for a run already
        over. One that comes before the code has started waits for it to start."""
        if self.current is None:
            return
        if self.current.started:
            self.signal_interpreter()
        else:
            self.current.interrupt = True

    def signal_interpreter(self):
        """SIGINT to the interpreter; for bash, to its process group, so that the command in the
        foreground (a child of the shell, in its group) ends too and the shell's trap ends the
        run (its background jobs ignore SIGINT, as a shell without job control starts them)."""
        try:
            if self.language == languages.BASH:
                os.killpg(self.child, signal.SIGINT)
            else:
                os.kill(self.child, signal.SIGINT)
        except ProcessLookupError:
            pass

    # A run's beginning and end.

    def begin(self, data):
        self.seq += 1
        try:
            control = bundle.read_control(bundle.control_members(data).get(protocol.CONTROL_FILE))
        except Rejected as why:
            reject(f"session: {why}")
        if control is None:
            reject("session: a run without its control file")
        egress = bundle.egress_nonce(control)
        if egress is not None and self.relay is None:
            # The proxy variables go to every interpreter started from now on (a bash or
            # JavaScript session's, next), and to Python's, already running, with this run.
            self.environment = relay.proxy_environment(control)
            os.environ.update(self.environment)
            self.relay = relay.Relay(self.loop, egress)
        try:
            language = languages.of(control)
            if not self.delivered and language != self.language:
                languages.check_interpreter(language)
                self.replace_interpreter(language)
            elif language != self.language:
                raise Rejected(f"this session runs {self.language}, not {language}")
            members, names = bundle.unpack(io.BytesIO(data), replace=True)
            bundle.require_code(names, language)
            control_stdin = members.get(protocol.STDIN_FILE)
            if control_stdin is not None and language == languages.JAVASCRIPT:
                raise Rejected(f"a {language} session's runs read no stdin")
            out_dir = control[protocol.CONTROL_OUT_DIR]
            try:
                bundle.make_out_dir(out_dir)
            except OSError as error:
                raise Rejected(f"cannot make {out_dir}: {error}") from None
            before = files_out.state(out_dir)
            run = Run(self.seq, control, before)
            if control_stdin is not None and language == languages.BASH:
                try:
                    run.stdin_path = stdin_file(control_stdin)
                except OSError as error:
                    raise Rejected(f"cannot write the run's stdin under /tmp: {error}") from None
            stdin_r, stdin_w = os.pipe()
            try:
                self.deliver(run, stdin_r)
                self.delivered = True
            except Rejected:
                os.close(stdin_w)
                if run.stdin_path is not None:
                    remove_stdin_file(run.stdin_path)
                raise
            finally:
                os.close(stdin_r)
            run.feed = processes.Feed(self.loop, stdin_w, control_stdin or b"")
        except Rejected as why:
            self.refuse(control, str(why))
            return
        self.current = run

    def refuse(self, control, why):
        try:
            report.write_trailer(control[protocol.CONTROL_NONCE], None,
                                 extra={protocol.TRAILER_REFUSED: why})
        except OSError:
            pass
        self.next_run()

    def finish(self, answer=None, died=None):
        """Ends the run in progress: its output so far passed on, its files collected, its
        trailer written; then the next run, if one is waiting."""
        run, self.current = self.current, None
        self.drain()
        if run.feed is not None:
            run.feed.close()
        if run.stdin_path is not None:
            remove_stdin_file(run.stdin_path)
        control = run.control
        files, omitted = files_out.collect(control[protocol.CONTROL_OUT_DIR], control,
                                           unchanged=run.before)
        if died is None:
            answer = read_answer(answer, control[protocol.CONTROL_RESULT_CAP])
            exit, exception, result = answer["exit"], answer["exception"], answer["result"]
        else:
            exit, exception, result = report.exit_record(died), None, None
        try:
            report.write_trailer(control[protocol.CONTROL_NONCE], exit, exception, files, omitted,
                                 extra={protocol.TRAILER_RESULT: result,
                                        protocol.TRAILER_SESSION_OVER: died is not None})
        except OSError:
            pass
        if died is None:
            self.next_run()

    # The interpreter's output and answers.

    def drain(self):
        """Passes on what the interpreter's streams hold now. A stream whose writers have all
        ended (the interpreter died, or closed it) is forgotten as it is drained, so the loop
        goes over a copy: changing the dict it walks would raise, and end the session with 125
        instead of the run's own exit."""
        for fd in list(self.streams):
            self.pump(fd, bound=MAX_DRAIN_BYTES, forward=True)

    def pump(self, fd, bound=CHUNK, forward=None):
        """Reads what `fd` holds (up to `bound` bytes) and passes it on while a run is in
        progress; drops it between runs."""
        if fd not in self.streams:
            return
        forward = self.current is not None if forward is None else forward
        taken = 0
        while taken < bound:
            try:
                data = os.read(fd, CHUNK)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:  # every process that held it has ended
                self.loop.remove(fd)
                os.close(fd)
                del self.streams[fd]
                return
            taken += len(data)
            if forward:
                report.write_all(data, self.streams[fd])

    def on_channel(self, _):
        while True:
            try:
                message, ancillary, flags, _ = self.channel.recvmsg(
                    CHUNK, socket.CMSG_SPACE(CREDENTIALS.size))
            except BlockingIOError:
                return
            except OSError:
                message, ancillary, flags = b"", [], 0
            if not message:  # the interpreter's end closed: its exit says the rest
                self.loop.remove(self.channel.fileno())
                return
            if self.sender(ancillary) != self.child:
                continue  # not the interpreter: a process the code left, or one it forked
            last, data = self.answers.feed(message, truncated=bool(flags & socket.MSG_TRUNC))
            if last:
                self.on_message(None if data is None else report.parse_json(data))

    @staticmethod
    def sender(ancillary):
        for level, kind, data in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                return CREDENTIALS.unpack(data[:CREDENTIALS.size])[0]
        return None

    def on_message(self, value):
        run = self.current
        if run is None:
            return
        if isinstance(value, dict) and value.get(channel.STARTED) == run.seq:
            run.started = True
            if run.interrupt:
                self.signal_interpreter()
        elif isinstance(value, dict) and value.get(channel.RUN) == run.seq:
            self.finish(answer=value)
        elif value is None:
            self.finish(answer=None)  # from the interpreter itself, but not an answer

    def serve(self):
        self.loop.run(lambda: self.child in self.loop.exits or self.stdin_ended)
        if self.child in self.loop.exits:
            status = self.loop.exits[self.child]
            if self.current is not None:
                self.finish(died=status)
            processes.end_every_process()
            report.exit_like(report.exit_record(status))
        processes.end_every_process()
        os._exit(0)


def stdin_file(data):
    """A bash run's stdin, which the shell takes as a redirection from a file (a shell cannot be
    handed a descriptor once it runs): written whole before the run is delivered, in a directory
    of its own under /tmp (private to the sandbox's one uid, the code's, which may read its own
    stdin), removed when the run ends."""
    directory = tempfile.mkdtemp(prefix=".scs-stdin-", dir="/tmp")
    path = os.path.join(directory, "stdin")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o400)
    try:
        report.write_all(data, fd)
    finally:
        os.close(fd)
    return path


def remove_stdin_file(path):
    """The file and its directory; what the code did to either is its own business."""
    for remove, name in ((os.unlink, path), (os.rmdir, os.path.dirname(path))):
        try:
            remove(name)
        except OSError:
            pass


def serve(root):
    session = Session(root)
    try:
        session.serve()
    except Exception:
        processes.end_every_process()
        if session.current is not None:
            try:
                report.write_trailer(
                    session.current.control[protocol.CONTROL_NONCE], None,
                    extra={protocol.TRAILER_SESSION_OVER: True,
                           protocol.TRAILER_LAUNCHER_ERROR: traceback.format_exc()[-4096:]})
            except OSError:
                pass
        os._exit(protocol.REJECTED_EXIT)
