"""The sandbox's processes, as PID 1 sees them: its children started and confined, every other
process ended at the end, orphans reaped, and one loop that serves descriptors while the program
runs.

PID 1 shares the program's uid, so the program's process cap (RLIMIT_NPROC) counts PID 1's
threads too: a program that forks until EAGAIN would leave PID 1 unable to start one. So PID 1
starts every thread it will ever have (the deadline's) and its children before any program code
runs, and serves everything after that from one thread with poll(), woken by SIGCHLD."""

import fcntl
import os
import select
import signal
import time

from . import program_filter

CHUNK = 1 << 16
KILL_PATIENCE_SECONDS = 5
READABLE = select.POLLIN | select.POLLHUP | select.POLLERR
WRITABLE = select.POLLOUT | select.POLLHUP | select.POLLERR
PYTHON = "/usr/bin/python3"
WORKSPACE = "/workspace"


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


def spawn(argv, fds=(), stdin_fd=None, stdout_fd=None, stderr_fd=None, at=None):
    """Starts a child interpreter of the program's: a session and process group of its own, the
    signals' default actions, the OOM killer's first pick, the program's seccomp filter, then
    exec of `argv` (argv[0] an absolute path) in /workspace. `fds` are kept open in it
    (inheritable), and `at` ({number: fd}) gives it `fd` as `number`; stdin, stdout and stderr
    become the given descriptors (stdin /dev/null when none). A failure before exec is
    written to PID 1's own stderr and the child exits with the protocol's rejected code.
    Returns its pid."""
    pid = os.fork()
    if pid != 0:
        return pid
    try:
        errors = os.dup(2)  # PID 1's stderr, for a failure before exec; closed by exec
        os.setsid()
        if stdin_fd is None:
            stdin_fd = os.open("/dev/null", os.O_RDONLY)
        for target, fd in ((0, stdin_fd), (1, stdout_fd), (2, stderr_fd)):
            if fd is not None and fd != target:
                os.dup2(fd, target)
        # Above every target first, so that no dup2() below closes a source still to be moved.
        moved = {number: fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 64)
                 for number, fd in (at or {}).items()}
        for number, fd in moved.items():
            os.dup2(fd, number)  # inheritable
        for fd in fds:
            os.set_inheritable(fd, True)
        os.chdir(WORKSPACE)
        program_filter.prepare()
        os.execv(argv[0], argv)
    except BaseException as error:  # nothing may return from here into PID 1's code
        try:
            os.write(errors, f"sandbox launcher: rejected setup: {error}\n".encode(
                "utf-8", "replace"))
        except BaseException:
            pass
    os._exit(125)


def _woken(*_):
    """SIGCHLD's handler: set_wakeup_fd() does the work (wakes poll)."""


class Loop:
    """One thread's poll() over the descriptors PID 1 serves, with the children it waits for
    reaped as they end (every other process is an orphan, reaped and forgotten)."""

    def __init__(self):
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.signal(signal.SIGCHLD, _woken)
        signal.set_wakeup_fd(self._wake_w, warn_on_full_buffer=False)
        self._poll = select.poll()
        self._poll.register(self._wake_r, select.POLLIN)
        self._handlers = {}  # fd -> (events, callback(revents))
        self._watched = set()
        self.exits = {}  # pid -> wait status, for the watched pids that ended

    def close(self):
        """Gives up the wakeup pipe, for another loop to take SIGCHLD."""
        signal.set_wakeup_fd(-1)
        os.close(self._wake_r)
        os.close(self._wake_w)

    def watch(self, pid):
        self._watched.add(pid)

    def unwatch(self, pid):
        """`pid` was reaped elsewhere (end_every_process()), or is no longer waited for."""
        self._watched.discard(pid)
        self.exits.pop(pid, None)

    def add(self, fd, events, callback):
        self._handlers[fd] = (events, callback)
        self._poll.register(fd, events)

    def remove(self, fd):
        if self._handlers.pop(fd, None) is not None:
            self._poll.unregister(fd)

    def reap(self):
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid in self._watched:
                self.exits[pid] = status

    def run(self, done, timeout=None):
        """Serves until done() holds, or `timeout` seconds pass (None: no limit)."""
        until = None if timeout is None else time.monotonic() + timeout
        self.reap()
        while not done():
            wait = None if until is None else max(0.0, until - time.monotonic())
            if wait == 0.0:
                return
            for fd, revents in self._poll.poll(None if wait is None else wait * 1000):
                if fd == self._wake_r:
                    try:
                        while os.read(self._wake_r, 4096):
                            pass
                    except BlockingIOError:
                        pass
                    continue
                handler = self._handlers.get(fd)
                if handler is not None:
                    handler[1](revents)
            self.reap()


class Feed:
    """Writes `data` to the pipe `fd` as it drains, then closes it (also when the reader left)."""

    def __init__(self, loop, fd, data):
        self.loop, self.fd, self.pending = loop, fd, memoryview(data)
        os.set_blocking(fd, False)
        if self.pending:
            loop.add(fd, WRITABLE, self.ready)
        else:
            self.close()

    def ready(self, _):
        try:
            self.pending = self.pending[os.write(self.fd, self.pending[:CHUNK]):]
        except BlockingIOError:
            return
        except OSError:
            self.pending = self.pending[:0]
        if not self.pending:
            self.loop.remove(self.fd)
            self.close()

    def close(self):
        if self.fd is not None:
            self.loop.remove(self.fd)
            os.close(self.fd)
            self.fd = None


class Drain:
    """Reads the pipe `fd` to its end, keeping the first `cap` bytes."""

    def __init__(self, loop, fd, cap):
        self.loop, self.fd, self.cap = loop, fd, cap
        self.chunks, self.size = [], 0
        os.set_blocking(fd, False)
        loop.add(fd, READABLE, self.ready)

    def ready(self, _):
        while self.fd is not None:
            try:
                data = os.read(self.fd, CHUNK)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                self.loop.remove(self.fd)
                os.close(self.fd)
                self.fd = None
                return
            if self.size < self.cap:
                self.chunks.append(data[:self.cap - self.size])
                self.size += len(self.chunks[-1])
