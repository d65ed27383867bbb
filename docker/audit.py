"""Posture audit: runs inside one sandbox and checks every control from the inside.

Sent by `safe-code-sandbox audit` as the run's main.py (it is not part of the image), together with
its checks, audit_process.py and audit_filesystem.py, and audit.json, which names the runtime and
the posture the server asked for:
  {"runtime": "runc"|"runsc", "uid_first": N, "uid_last": N, "pids_limit": N,
   "processes_limit": 256, "open_files_limit": 1024, "file_size_limit_bytes": N,
   "tmpfs": {"/tmp": {"size_bytes": N, "max_inodes": N}, "/workspace": {...}},
   "masked_paths": [...], "readonly_paths": [...], "budget_seconds": 90,
   "ip_sockets_refused": true|false}
ip_sockets_refused says the launcher's --no-network refuses the program every socket but AF_UNIX,
for an engine that leaves the sandbox a network interface (a Pod's eth0): the network check then
wants that refusal in place of "only lo". Absent, it is whether PID 1's command line carries
--no-network: the server's read-back has checked that command line is the one it sent, and the
audit checks what the flag does.
Prints one JSON object per line for each check:
  {"name": ..., "ok": true|false, "expected": ..., "observed": ..., "detail": ...}
then {"done": true, "checks": <count>}. Standard library only. Every check is bounded in time and in
what it creates, and the whole program stops itself after budget_seconds.
Exit status: 0 when the program ran to the end (whatever the verdicts), 3 on a bad audit.json.
"""

import ctypes
import errno
import json
import os
import signal
import sys

# The checks, sent beside this program: `python3 -I` leaves its directory off sys.path. No
# bytecode is written into the workspace.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True
import audit_filesystem
import audit_process

# Sent beside this program, in the workspace.
CONFIG_FILES = ("audit.json", "/workspace/audit.json")

# What each runtime must answer. Where runsc differs from runc, the comment says why the answer is
# still safe: under gVisor the call is handled by the Sentry (gVisor's own kernel in user space),
# so it never reaches the host kernel, and the Sentry itself runs under gVisor's own host seccomp
# filter. Errno values are names; a set means any of them.
EXPECTED = {
    "runc": {
        # /proc/self/status reports the kernel's view: the engine set no_new_privs and mode 2.
        "no_new_privs_status": "1",
        "cap_amb_line": True,
        "seccomp_status": "2",
        # The project's seccomp profile allows socket() only for AF_UNIX, AF_INET, AF_INET6 and
        # AF_NETLINK; every other family fails with EPERM before any kernel code runs.
        "socket_errno": {"AF_VSOCK": {"EPERM"}, "AF_PACKET": {"EPERM"}, "AF_ALG": {"EPERM"}},
        # Not in the profile's allowlist (io_uring removed from Docker 20.10's default), or
        # allowed only with CAP_SYS_ADMIN, which no sandbox holds: EPERM.
        "syscall_errno": {"io_uring_setup": {"EPERM"}, "mount": {"EPERM"},
                          "unshare_user": {"EPERM"}, "keyctl": {"EPERM"}, "bpf": {"EPERM"},
                          "perf_event_open": {"EPERM"}, "mknod": {"EPERM"}},
        # The engine's profile and the launcher's filter (the program's own) are both on.
        "tmpfs_flags_visible": True,
        "tmpfs_inode_cap": True,
        # The engine bind-mounts each ReadonlyPaths entry read-only over itself.
        "readonly_paths_mounted": True,
        "extra_devices": set(),
    },
    "runsc": {
        # gVisor's /proc/self/status has no NoNewPrivs line; prctl(PR_GET_NO_NEW_PRIVS) below
        # still checks the flag the Sentry enforces.
        "no_new_privs_status": None,
        # Nor a CapAmb line: the ambient set is a subset of the permitted and the inheritable
        # sets, both checked empty.
        "cap_amb_line": False,
        # The engine's seccomp profile is not installed inside gVisor (runsc applies it only with
        # --oci-seccomp). The launcher's own filter is: the Sentry applies it to the program
        # (mode 2). What the engine's profile would refuse reaches the Sentry, not the host
        # kernel; the Sentry's own host filter is the boundary.
        "seccomp_status": "2",
        # The Sentry implements no vsock or AF_ALG family (EAFNOSUPPORT); packet sockets need
        # CAP_NET_RAW, which is dropped, and there is no device to bind to with --network=none.
        "socket_errno": {"AF_VSOCK": {"EAFNOSUPPORT"}, "AF_PACKET": {"EPERM"},
                         "AF_ALG": {"EAFNOSUPPORT"}},
        "syscall_errno": {
            # The Sentry has an io_uring of its own, which the engine's profile does not reach:
            # the launcher's filter refuses it, as the engine's profile does under runc.
            "io_uring_setup": {"EPERM"},
            "mount": {"EPERM"},
            # The Sentry implements user namespaces itself, and a new one would exempt its
            # processes from RLIMIT_NPROC (the process cap under gVisor): the launcher's filter
            # refuses unshare.
            "unshare_user": {"EPERM"},
            # The Sentry's minimal keyrings refuse the session keyring; it creates no BPF maps
            # without CAP_SYS_ADMIN; it has no perf events at all.
            "keyctl": {"EACCES"},
            "bpf": {"EPERM"},
            "perf_event_open": {"ENODEV"},
            # mknod works on the Sentry's own tmpfs; the node is a name in gVisor's memory, and
            # opening it cannot reach a host device.
            "mknod": {"OK"},
        },
        # gVisor's mountinfo omits nosuid and nodev on tmpfs mounts; noexec and the size cap are
        # checked by behaviour below (exec refused, ENOSPC at the cap).
        "tmpfs_flags_visible": False,
        # gVisor serves /proc from its own procfs and does not apply the OCI readonlyPaths as
        # mounts: /proc/sys is the Sentry's own sysctl tree, whose few writable entries belong to
        # root and tune only the Sentry's network stack. The sandbox user's writes are refused.
        "readonly_paths_mounted": False,
        # gVisor's tmpfs ignores nr_inodes; empty files still cost Sentry memory, which the
        # sandbox's memory cgroup caps on the host.
        "tmpfs_inode_cap": False,
        # gVisor's own /dev/fuse and /dev/net/tun are Sentry devices, not host ones.
        "extra_devices": {"fuse", "net/tun"},
    },
}


def launcher_flags():
    """PID 1's command line (the launcher's), which every process may read."""
    try:
        with open("/proc/1/cmdline", "rb") as cmdline:
            return cmdline.read().decode(errors="replace").split("\0")
    except OSError:
        return []


class Audit:
    def __init__(self, config):
        config.setdefault("ip_sockets_refused", "--no-network" in launcher_flags())
        self.config = config
        self.runtime = config["runtime"]
        self.expect = EXPECTED[self.runtime]
        self.count = 0
        self.confined = None  # confined() judges it once
        arch = os.uname().machine
        self.arch = arch
        self.numbers = audit_process.SYSCALLS.get(arch)
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.libc.syscall.restype = ctypes.c_long

    def report(self, name, ok, expected, observed, detail=""):
        self.count += 1
        line = {"name": name, "ok": bool(ok), "expected": str(expected),
                "observed": str(observed), "detail": detail}
        sys.stdout.write(json.dumps(line) + "\n")
        sys.stdout.flush()

    def run(self, name, check):
        try:
            check()
        except Exception as error:  # a check that cannot run is a failed check
            self.report(name, False, "check completes", f"{type(error).__name__}: {error}")

    def syscall(self, name, *args):
        """Returns "OK" or the errno name of the raw system call."""
        if self.numbers is None:
            raise RuntimeError(f"no system call numbers for {self.arch}")
        ctypes.set_errno(0)
        result = self.libc.syscall(ctypes.c_long(self.numbers[name]),
                                   *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
        if result >= 0:
            return "OK"
        return errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))

    def prctl(self, option):
        ctypes.set_errno(0)
        result = self.libc.prctl(ctypes.c_int(option), ctypes.c_ulong(0), ctypes.c_ulong(0),
                                 ctypes.c_ulong(0), ctypes.c_ulong(0))
        if result < 0:
            return errno.errorcode.get(ctypes.get_errno(), "?")
        return str(result)


CHECKS = [
    ("uid_gid", audit_process.check_identity),
    ("capabilities", audit_process.check_capabilities),
    ("no_new_privs", audit_process.check_no_new_privs),
    ("seccomp_mode", audit_process.check_seccomp),
    ("rlimits", audit_process.check_rlimits),
    ("root_read_only", audit_filesystem.check_root_read_only),
    ("tmpfs_options", audit_filesystem.check_tmpfs_options),
    ("masked_paths", audit_filesystem.check_masked_paths),
    ("readonly_paths", audit_filesystem.check_readonly_paths),
    ("devices", audit_filesystem.check_devices),
    ("network", audit_process.check_network),
    ("egress", audit_process.check_egress),
    ("socket_families", audit_process.check_socket_families),
    ("syscalls", audit_process.check_syscalls),
    ("exec_refused", audit_filesystem.check_exec_refused),
    ("host_files", audit_filesystem.check_host_files),
    ("interpreters", audit_filesystem.check_interpreters),
    ("tmpfs_caps", audit_filesystem.check_tmpfs_caps),
    ("pids_cap", audit_process.check_pids_cap),
    ("pid1", audit_process.check_pid1),
    ("memfd", audit_process.check_memfd_refused),
]


def main():
    try:
        path = next((p for p in CONFIG_FILES if os.path.exists(p)), CONFIG_FILES[0])
        with open(path) as source:
            config = json.load(source)
        if config.get("runtime") not in EXPECTED:
            raise ValueError(f"unknown runtime {config.get('runtime')!r}")
    except (OSError, ValueError) as error:
        sys.stderr.write(f"audit: cannot read audit.json: {error}\n")
        return 3
    audit = Audit(config)

    def out_of_time(_signal, _frame):
        audit.report("audit_budget", False, f"done within {config['budget_seconds']} s",
                     "ran out of time")
        sys.stdout.write(json.dumps({"done": False, "checks": audit.count}) + "\n")
        sys.stdout.flush()
        os._exit(0)

    signal.signal(signal.SIGALRM, out_of_time)
    signal.alarm(int(config.get("budget_seconds", 90)))
    for name, check in CHECKS:
        audit.run(name, lambda: check(audit))
    signal.alarm(0)
    sys.stdout.write(json.dumps({"done": True, "checks": audit.count}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
