"""For an engine that cannot set resource limits or show its /proc masking (a Kubernetes Pod):
PID 1 lowers its own limits and checks the masked and read-only paths first, before anything
else runs; a path that is not as asked ends the sandbox with protocol.REJECTED_EXIT."""

import errno
import os
import resource

from .rejection import reject

RLIMITS = {
    "nproc": resource.RLIMIT_NPROC,
    "nofile": resource.RLIMIT_NOFILE,
    "fsize": resource.RLIMIT_FSIZE,
    "core": resource.RLIMIT_CORE,
}


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


def check_masked(paths):
    """Each path is masked, as runc masks one: absent, an empty directory (a tmpfs over it), or
    a file that reads nothing (/dev/null over it). Anything else ends the sandbox before any
    code runs: the engine was asked to mask it and did not."""
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
