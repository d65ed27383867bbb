"""What PID 1 does in the program's process between fork and exec: the signals' default actions
back, the OOM killer's first choice, and the program's own seccomp filter, which binds the
program and everything it starts, never PID 1."""

import ctypes
import errno
import signal

PR_SET_DUMPABLE = 4
CLONE_NEWUSER = 0x10000000
AF_UNIX = 1
# Above every address family: the kernel answers EAFNOSUPPORT to a family at or past its AF_MAX
# (46 since Linux 5.15 added AF_MCTP) before any family's code runs, and 64 leaves room for the
# families later kernels add.
AF_BOUND = 64

# --no-network: pid1.main() sets it once, before any child starts.
NO_NETWORK = False


def default_signals():
    """Undoes pid1.ignore_signals(), since an ignored signal stays ignored across exec."""
    for number in signal.valid_signals():
        if number not in (signal.SIGKILL, signal.SIGSTOP):
            try:
                signal.signal(number, signal.SIG_DFL)
            except (OSError, ValueError):
                pass


def raise_oom_score():
    """In the child before exec: the OOM killer picks the program, not the launcher."""
    # A non-dumpable process's /proc files belong to root; the program has not started yet.
    ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
    try:
        with open("/proc/self/oom_score_adj", "w") as adj:
            adj.write("1000")
    except OSError:
        pass


def install_seccomp_filter(no_network=False):
    """In the child before exec: a seccomp filter for the program and everything it starts. It
    refuses what no Python program needs and what would let it reach PID 1 or run bytes it wrote:
    ptrace; reading or writing another process's memory; memfd_create (an executable file no
    noexec mount covers); io_uring (gVisor answers it; no filter can read what its rings ask);
    new user namespaces (under gVisor they would exempt it from the process cap); every signal
    addressed to PID 1, directly or as I/O notification (gVisor delivers those, Linux does not);
    setting extended attributes, which no Landlock right covers (on a file of the host's disk
    they would fill it past RLIMIT_FSIZE). clone3 answers ENOSYS, so the C library falls back to
    clone, whose flags the filter can read. Debian's python3-seccomp (libseccomp) builds the BPF
    for this architecture: it kills a call of any other, such as i386's socketcall.

    `no_network` (--no-network, for a sandbox with a network interface, as a Pod has eth0, that
    only a NetworkPolicy may cut): socket() and socketpair() of every family but AF_UNIX answer
    EACCES, so no IP, netlink or packet socket is ever made, whatever the cluster's network
    plugin enforces. socketpair() too: since Linux 4.12 it also makes AF_TIPC pairs, not only
    AF_UNIX ones. io_uring's socket operation needs no rule (io_uring is refused)."""
    import seccomp

    rules = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
    refused = seccomp.ERRNO(errno.EPERM)
    for name in ("ptrace", "process_vm_readv", "process_vm_writev", "memfd_create", "unshare",
                 "setns", "tkill"):
        rules.add_rule(refused, name)
    # io_uring: the engine's profile refuses it under runc, but gVisor applies no engine profile
    # (its own io_uring answers inside the Sentry); the same denial holds under every runtime.
    for name in ("io_uring_setup", "io_uring_enter", "io_uring_register"):
        rules.add_rule(refused, name)
    # Extended attributes are data no mount flag or Landlock right covers: on a file an engine
    # mounts from the host's disk (the kubelet's termination log is mode 0666) they would fill
    # that disk past RLIMIT_FSIZE. No Python program needs to set them.
    for name in ("setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr",
                 "fremovexattr"):
        rules.add_rule(refused, name)
    for name in ("setxattrat", "removexattrat"):  # Linux 6.13: Debian's libseccomp lacks them
        try:
            rules.add_rule(refused, name)
        except RuntimeError:
            pass
    # A pid argument is an int: only its low 32 bits count (kill(1 + 2**32) is kill(1)).
    to_init = seccomp.Arg(0, seccomp.MASKED_EQ, 0xFFFFFFFF, 1)
    for name in ("kill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "pidfd_open"):
        rules.add_rule(refused, name, to_init)
    rules.add_rule(refused, "clone",
                   seccomp.Arg(0, seccomp.MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER))
    rules.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    f_setown, f_setsig, f_setown_ex = 8, 10, 15
    for owner in (1, 0xFFFFFFFF):  # PID 1, or its process group (-1)
        rules.add_rule(refused, "fcntl", seccomp.Arg(1, seccomp.EQ, f_setown),
                       seccomp.Arg(2, seccomp.MASKED_EQ, 0xFFFFFFFF, owner))
    for command in (f_setsig, f_setown_ex):
        rules.add_rule(refused, "fcntl", seccomp.Arg(1, seccomp.EQ, command))
    for request in (0x8901, 0x8902, 0x5410):  # FIOSETOWN, SIOCSPGRP, TIOCSPGRP
        rules.add_rule(refused, "ioctl", seccomp.Arg(1, seccomp.MASKED_EQ, 0xFFFFFFFF, request))
    if no_network:
        # The family is an int: only its low 32 bits count. libseccomp has no masked not-equal,
        # so one rule per family refused.
        for name in ("socket", "socketpair"):
            for family in range(AF_BOUND):
                if family != AF_UNIX:
                    rules.add_rule(seccomp.ERRNO(errno.EACCES), name,
                                   seccomp.Arg(0, seccomp.MASKED_EQ, 0xFFFFFFFF, family))
    rules.load()


def prepare():
    """All three, in order: the program has not started yet."""
    default_signals()
    raise_oom_score()
    install_seccomp_filter(NO_NETWORK)
