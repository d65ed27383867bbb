"""A run's interpreter: `python3 -I main.py`, as PID 1 starts it ahead of the code, with an
uncaught exception also reported over a pipe.

`python3 -I -c STUB ROOT scs_launcher.child.program REPORT_FD GO_FD WARM`. Started before the
bundle is read (in a sandbox prepared ahead of its run, long before), it imports the modules of
WARM (comma-separated, maybe none) with their output and warnings discarded, one after another
until the run's byte is there (a run that arrives while they import waits for the module being
imported only, never for the rest: what is left the program imports itself if it needs it),
then waits for one byte on GO_FD: "0" runs /workspace/main.py with stdin on /dev/null, "1" with the stdin PID 1
gave it, nothing (PID 1 gave up) exits. main.py starts with the namespace, sys.argv and sys.path
it would have; what the program can tell is the time its own imports take, sys.modules, the
threads those modules started (OpenBLAS's), and that the objects the imports made are frozen out
of the garbage collector's view (gc.get_freeze_count()). Those threads are started with every
signal blocked, so a signal sent to the process reaches the program's own threads as in a fresh
interpreter (a thread that did not block SIGRTMIN would be killed by one the program queues to
itself with SIGRTMIN blocked, and the whole process with it)."""

import os
import signal
import sys

from .. import protocol
from . import record

PATH = "/workspace/main.py"
PACKAGE = __name__.split(".")[0]
PACKAGES = protocol.PACKAGES_DIRECTORY


# This package's modules, alive while the code runs, though no longer in sys.modules.
KEPT = []


def forget_launcher(root):
    """The program's sys.path and sys.modules as a script's: nothing of this package in them."""
    if sys.path and sys.path[0] == root:
        del sys.path[0]
    mine = [name for name in sys.modules if name == PACKAGE or name.startswith(PACKAGE + ".")]
    KEPT.extend(sys.modules.pop(name) for name in mine)


def use_packages(directory):
    """In an image derived for a run's packages: `directory` (protocol.PACKAGES_DIRECTORY) goes
    on sys.path ahead of the image's own site directories, so that a version asked for wins
    over the image's, and its .pth files are read as a site directory's. Before the warm
    imports, which would otherwise import the image's versions. Its code runs here, in the
    program's process, under the program's filter: never in PID 1."""
    if not os.path.isdir(directory):
        return
    import site

    first_site = next((i for i, entry in enumerate(sys.path)
                       if entry.endswith(("-packages", "-packages/"))), len(sys.path))
    sys.path.insert(first_site, directory)
    site.addsitedir(directory)


def warm(names, go):
    """Imports `names` in order, and stops before the next one once `go` is readable. Their
    seconds when all were imported, else None."""
    import importlib
    import select
    import time
    import warnings

    started = time.monotonic()
    complete = True
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
                if select.select([go], [], [], 0)[0]:
                    complete = False
                    break  # the run is here: it waits for no more
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
    return time.monotonic() - started if complete else None


def report(fd, exception):
    import json

    view = memoryview(json.dumps(exception).encode("ascii") + b"\n")
    try:
        while view:
            view = view[os.write(fd, view):]
    except OSError:
        pass


def main():
    root, fd, go, names = sys.argv[1], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    forget_launcher(root)
    use_packages(PACKAGES)
    os.set_inheritable(fd, False)
    # The first line on the report pipe, always this interpreter's, written before any of the
    # program's code runs: how long the warm imports took (PID 1 reads no other as that).
    seconds = warm(names.split(","), go) if names else None
    report(fd, {"warm_seconds": seconds})
    word = os.read(go, 1)
    environment = b""  # with egress, the proxy variables follow the word, as JSON
    while data := os.read(go, 1 << 16):
        environment += data
    os.close(go)
    if environment:
        import json

        os.environ.update(json.loads(environment))
    if word not in (b"0", b"1"):
        os._exit(0)
    if word == b"0":
        null = os.open("/dev/null", os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
    owner = os.getpid()
    sys.argv[:] = ["main.py"]
    sys.stdout.reconfigure(line_buffering=True)
    namespace = sys.modules["__main__"].__dict__
    namespace["__file__"] = PATH
    namespace["__cached__"] = None
    namespace["__loader__"] = sys.modules["_frozen_importlib_external"].SourceFileLoader(
        "__main__", PATH)
    try:
        with open(PATH, "rb") as source:
            code = compile(source.read(), PATH, "exec", dont_inherit=True)
        exec(code, namespace)
    except SystemExit:
        raise
    except BaseException as error:
        exception = record.uncaught(error, PATH)
        if os.getpid() == owner:
            report(fd, exception)
        if isinstance(error, KeyboardInterrupt):
            sys.stdout.flush()
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        raise SystemExit(1)
