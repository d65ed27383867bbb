"""PID 1's command line (the protocol's FLAG_* names), in any order:
`--deadline SECONDS`: the sandbox ends at most this long after it started. `--warm MODULE,...`:
the modules the program's interpreter imports while it waits for the code. For an engine that
cannot set or show them (a Kubernetes Pod): `--rlimits NAME=N,...`, resource limits to lower
itself to before anything else; `--masked PATH,...` and `--readonly PATH,...`, paths to find
masked and read-only before anything else; `--confine`, the Landlock rules of
landlock.confine_filesystem(); `--no-network`, for an engine whose sandbox has a network
interface (a Pod's eth0, which only a NetworkPolicy may cut): the program's filter refuses it
every socket but AF_UNIX (program_filter.install_seccomp_filter()), and PID 1 drops the
KUBERNETES_* variables from its environment (pid1.drop_kubernetes_variables()). `--session`: a
session's sandbox."""

import re
import types

from . import protocol
from .rejection import reject

MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")

# The resource limits --rlimits names.
RLIMIT_NAMES = ("nproc", "nofile", "fsize", "core")

USAGE = ("want --deadline SECONDS [--warm MODULE,...] [--rlimits NAME=N,...] [--masked PATH,...]"
         " [--readonly PATH,...] [--confine] [--no-network] [--session]")


def is_whole(text):
    """Only ASCII digits: str.isdigit() also takes "²", which int() refuses."""
    return text.isascii() and text.isdigit()


def parse_rlimits(text):
    """`nproc=256,nofile=1024,fsize=268435456,core=0`: each named once, a whole number. None
    when malformed."""
    limits = {}
    for item in text.split(","):
        name, _, value = item.partition("=")
        if name not in RLIMIT_NAMES or name in limits or not is_whole(value):
            return None
        limits[name] = int(value)
    return limits


def parse_paths(text):
    """`/proc/keys,/sys/firmware`: absolute paths, comma-separated. None when malformed."""
    paths = text.split(",")
    if not all(p.startswith("/") and "\0" not in p for p in paths):
        return None
    return paths


def parse_modules(text):
    modules = text.split(",")
    return modules if all(MODULE_NAME.fullmatch(m) for m in modules) else None


VALUED = {
    protocol.FLAG_DEADLINE: ("deadline", lambda v: int(v) if is_whole(v) and int(v) > 0 else None),
    protocol.FLAG_WARM: ("warm", parse_modules),
    protocol.FLAG_RLIMITS: ("rlimits", parse_rlimits),
    protocol.FLAG_MASKED: ("masked", parse_paths),
    protocol.FLAG_READONLY: ("readonly", parse_paths),
}
SWITCHES = {protocol.FLAG_SESSION: "session", protocol.FLAG_CONFINE: "confine",
            protocol.FLAG_NO_NETWORK: "no_network"}


def parse(argv):
    """The flags as attributes (deadline None when not given); anything else ends the sandbox
    before any code runs."""
    given = {"deadline": None, "warm": [], "session": False, "confine": False,
             "no_network": False, "rlimits": {}, "masked": [], "readonly": []}
    rest = list(argv)
    while rest:
        flag = rest.pop(0)
        if flag in SWITCHES:
            given[SWITCHES[flag]] = True
            continue
        if not rest:
            reject(f"setup: arguments {argv!r}: {flag!r} needs a value")
        value = rest.pop(0)
        name, parser = VALUED.get(flag, (None, lambda v: None))
        parsed = parser(value)
        if parsed is None:
            reject(f"setup: arguments {argv!r}: {USAGE}")
        given[name] = parsed
    return types.SimpleNamespace(**given)
