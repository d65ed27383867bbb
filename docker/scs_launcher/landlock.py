"""`--confine`: Landlock for the whole sandbox, for an engine whose scratch mounts take no noexec,
nosuid or nodev and which mounts a writable file of the host's disk into the sandbox (a
Kubernetes Pod; docs/SECURITY.md 2b)."""

import ctypes
import os

from .rejection import reject

WORKSPACE = "/workspace"

# Landlock (linux/landlock.h): syscall numbers, the rights this launcher handles, and where it
# grants them. The numbers are the same on every architecture.
LANDLOCK_CREATE_RULESET, LANDLOCK_ADD_RULE, LANDLOCK_RESTRICT_SELF = 444, 445, 446
LANDLOCK_CREATE_RULESET_VERSION = 1
LANDLOCK_RULE_PATH_BENEATH = 1
FS_EXECUTE, FS_WRITE_FILE, FS_MAKE_CHAR, FS_MAKE_BLOCK = 1 << 0, 1 << 1, 1 << 6, 1 << 11
FS_TRUNCATE = 1 << 14  # Landlock ABI 3 (Linux 6.2)
PR_SET_NO_NEW_PRIVS = 38
EXECUTABLE_TREE = "/usr"  # the image's programs and libraries, on its read-only root
SCRATCH = (WORKSPACE, "/tmp", "/dev/shm")
# procfs holds no file of a disk; the program's interpreter writes its own oom_score_adj there
# (program_filter.raise_oom_score()).
WRITABLE_PSEUDO = ("/proc",)
# Devices a program opens for writing by name; /dev/pts holds the ptys os.openpty() makes.
WRITABLE_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom",
                    "/dev/tty", "/dev/ptmx", "/dev/pts")


class _PathBeneath(ctypes.Structure):
    _pack_ = 1  # struct landlock_path_beneath_attr is packed
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def confine_filesystem():
    """`--confine`, for an engine whose scratch mounts take no noexec, nosuid or nodev and which
    mounts a writable file of the host's disk into the sandbox (a Kubernetes Pod's emptyDirs and
    its /dev/termination-log and /etc/hosts). Before anything else runs, PID 1 restricts itself,
    and so every process the sandbox will ever have, with Landlock: files execve only from
    beneath /usr (so no binary or script written to scratch space runs, setuid or not; a
    dropped file can still be mapped executable, docs/SECURITY.md 2b); files open for
    writing only beneath /workspace, /tmp, /dev/shm and /proc (the program's own oom_score_adj)
    and at the devices above (so no file of the host's disk is written; the program's filter,
    program_filter.py, refuses extended attributes); no character or block device is made
    anywhere. Kernels without Landlock (gVisor answers ENOSYS) end the sandbox with 125: refused,
    never weakened."""
    libc = ctypes.CDLL(None, use_errno=True)
    syscall = libc.syscall
    syscall.restype = ctypes.c_long
    abi = syscall(LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0),
                  ctypes.c_uint32(LANDLOCK_CREATE_RULESET_VERSION))
    if abi < 1:
        reject(f"setup: --confine: Landlock is unavailable: {os.strerror(ctypes.get_errno())}")
    writes = FS_WRITE_FILE | (FS_TRUNCATE if abi >= 3 else 0)
    handled = ctypes.c_uint64(FS_EXECUTE | writes | FS_MAKE_CHAR | FS_MAKE_BLOCK)
    ruleset = syscall(LANDLOCK_CREATE_RULESET, ctypes.byref(handled),
                      ctypes.c_size_t(ctypes.sizeof(handled)), ctypes.c_uint32(0))
    if ruleset < 0:
        reject(f"setup: --confine: landlock_create_ruleset: {os.strerror(ctypes.get_errno())}")

    def grant(path, access, required):
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except FileNotFoundError:
            if required:
                reject(f"setup: --confine: {path} is missing")
            return
        rule = _PathBeneath(access, fd)
        done = syscall(LANDLOCK_ADD_RULE, ctypes.c_int(ruleset),
                       ctypes.c_int(LANDLOCK_RULE_PATH_BENEATH), ctypes.byref(rule),
                       ctypes.c_uint32(0))
        error = ctypes.get_errno()
        os.close(fd)
        if done != 0:
            reject(f"setup: --confine: landlock_add_rule {path}: {os.strerror(error)}")

    grant(EXECUTABLE_TREE, FS_EXECUTE, True)
    for path in SCRATCH + WRITABLE_PSEUDO:
        grant(path, writes, True)
    for path in WRITABLE_DEVICES:
        grant(path, writes, False)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        reject(f"setup: --confine: PR_SET_NO_NEW_PRIVS: {os.strerror(ctypes.get_errno())}")
    if syscall(LANDLOCK_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
        reject(f"setup: --confine: landlock_restrict_self: {os.strerror(ctypes.get_errno())}")
    os.close(ruleset)
