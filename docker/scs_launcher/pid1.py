"""PID 1's sequence, in the order nothing may change: out of the program's reach first (not
dumpable, no signal handled), then the checks an engine could not make, then the deadline's
thread, and only then a program's interpreter, for one run (oneshot.py) or a session
(session.py; a sandbox prepared for a run becomes a session's when the server says so before
anything else).

Being PID 1 keeps the sandbox's deadline out of the program's reach. Linux delivers to a PID
namespace's init no signal from inside the namespace that it does not handle, SIGSTOP and
SIGKILL included, and PID 1 handles only SIGCHLD (which wakes its loop; the program's filter
refuses every signal addressed to PID 1, for gVisor, which does not protect its init). It makes
itself non-dumpable, so the program, which has the same uid, can neither ptrace it nor read its
memory or descriptors through /proc. `--deadline SECONDS` bounds the sandbox's whole life (a
sandbox prepared ahead of its run idles first); the control file's watchdog bounds the run from
the moment its code arrives. When either passes, the deadline's thread kills every process and
PID 1 exits 137."""

import ctypes
import os
import signal
import threading
import time

from . import arguments, engine_checks, landlock, processes, program_filter, protocol
from .rejection import reject

PR_SET_DUMPABLE = 4


def make_undumpable():
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        reject(f"setup: prctl(PR_SET_DUMPABLE) failed with errno {ctypes.get_errno()}")


def ignore_signals():
    """PID 1 handles no signal, so the kernel drops those sent from inside the sandbox; SIGCHLD
    is the loop's (processes.Loop)."""
    for number in signal.valid_signals():
        if number not in (signal.SIGKILL, signal.SIGSTOP, signal.SIGCHLD):
            try:
                signal.signal(number, signal.SIG_IGN)
            except (OSError, ValueError):
                pass


def drop_kubernetes_variables():
    """--no-network: the kubelet puts the API server's address in every container's environment
    (KUBERNETES_SERVICE_HOST, KUBERNETES_PORT_443_TCP and the rest), whatever the Pod's
    enableServiceLinks says. PID 1 unsets them in its own, which every program inherits."""
    for name in [name for name in os.environ if name.startswith("KUBERNETES_")]:
        del os.environ[name]


class Deadline:
    """Ends the sandbox when its time is up, should the server die before its own timer can: a
    thread of PID 1, started before any program code, SIGKILLs every other process, then PID 1
    exits 137. No signal is involved, so nothing the program sends can set it off early or hold
    it back, and nothing PID 1's loop waits for can delay it."""

    def __init__(self, seconds):
        self._at = time.monotonic() + seconds if seconds else None
        self._changed = threading.Condition()
        threading.Thread(target=self._watch, daemon=True).start()

    def shorten(self, seconds):
        with self._changed:
            at = time.monotonic() + seconds
            self._at = at if self._at is None else min(self._at, at)
            self._changed.notify()

    def restart(self, seconds):
        """The sandbox becomes a session's: its deadline is the session's, counted from now. Only
        before any program code has run (the session frame is the first thing on stdin, which
        the server alone writes)."""
        with self._changed:
            self._at = time.monotonic() + seconds
            self._changed.notify()

    def _watch(self):
        with self._changed:
            while self._at is None or time.monotonic() < self._at:
                self._changed.wait(None if self._at is None else self._at - time.monotonic())
        processes.end_every_process()
        os._exit(128 + signal.SIGKILL)


def offer_packages():
    """In an image derived for a run's packages (protocol.PACKAGES_DIRECTORY exists), a Python
    that a bash or JavaScript program starts finds them through PYTHONPATH, which every program
    inherits, after whatever the image's PYTHONPATH names. Such a Python puts PYTHONPATH ahead
    of the standard library and reads no .pth file there; the program's own interpreter runs
    with -I, which ignores PYTHONPATH, and adds the directory as a site directory after the
    standard library (child/program.py). PID 1 never has it on its path."""
    if os.path.isdir(protocol.PACKAGES_DIRECTORY):
        paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        os.environ["PYTHONPATH"] = os.pathsep.join(paths + [protocol.PACKAGES_DIRECTORY])


def main(argv, root):
    """`root`: the directory holding this package, which the program's interpreter imports its
    bootstrap from."""
    make_undumpable()
    ignore_signals()
    os.umask(0o022)
    setup = arguments.parse(argv)
    if setup.no_network:
        drop_kubernetes_variables()
        program_filter.NO_NETWORK = True
    engine_checks.lower_rlimits(setup.rlimits)
    engine_checks.check_masked(setup.masked)
    engine_checks.check_readonly(setup.readonly)
    if setup.confine:
        landlock.confine_filesystem()
    offer_packages()
    os.chdir(processes.WORKSPACE)
    deadline = Deadline(setup.deadline)
    if setup.session:
        from . import session

        session.serve(root)
    else:
        from . import oneshot

        oneshot.serve(deadline, setup.warm, root)
