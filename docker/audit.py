"""Posture audit: runs inside one sandbox and checks every control from the inside.

Sent by `safe-code-sandbox audit` as the run's main.py (it is not part of the image), together with
audit.json, which names the runtime and the posture the server asked for:
  {"runtime": "runc"|"runsc", "uid_first": N, "uid_last": N, "pids_limit": N,
   "processes_limit": 256, "open_files_limit": 1024, "file_size_limit_bytes": N,
   "tmpfs": {"/tmp": {"size_bytes": N, "max_inodes": N}, "/workspace": {...}},
   "masked_paths": [...], "readonly_paths": [...], "budget_seconds": 90}
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
import resource
import shutil
import signal
import socket
import stat
import sys
import time

# Sent beside this program, in the workspace.
CONFIG_FILES = ("audit.json", "/workspace/audit.json")

# Syscall numbers (x86_64, aarch64): the audit calls them directly, with harmless arguments.
SYSCALLS = {
    "x86_64": {"io_uring_setup": 425, "keyctl": 250, "bpf": 321, "perf_event_open": 298,
               "unshare": 272, "mount": 165, "mknodat": 259, "ptrace": 101,
               "process_vm_readv": 310, "memfd_create": 319, "kill": 62},
    "aarch64": {"io_uring_setup": 425, "keyctl": 219, "bpf": 280, "perf_event_open": 241,
                "unshare": 97, "mount": 40, "mknodat": 33, "ptrace": 117,
                "process_vm_readv": 270, "memfd_create": 279, "kill": 129},
}
PTRACE_SEIZE = 0x4206
CLONE_NEWUSER = 0x10000000
KEYCTL_GET_KEYRING_ID = 0
KEY_SPEC_SESSION_KEYRING = -3
BPF_MAP_CREATE = 0
PR_GET_SECCOMP = 21
PR_GET_NO_NEW_PRIVS = 39
AF_ALG = 38
AF_VSOCK = 40
AF_PACKET = 17

# The device nodes a sandbox may hold: the engine's standard set.
STANDARD_DEVICES = {"null", "zero", "full", "random", "urandom", "tty", "ptmx", "pts/ptmx",
                    "console"}

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


class Audit:
    def __init__(self, config):
        self.config = config
        self.runtime = config["runtime"]
        self.expect = EXPECTED[self.runtime]
        self.count = 0
        self.confined = None  # confined() judges it once
        arch = os.uname().machine
        self.arch = arch
        self.numbers = SYSCALLS.get(arch)
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


def status_fields():
    fields = {}
    with open("/proc/self/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    return fields


def mountinfo():
    """{mount point: (per-mount options, filesystem type, super options)}, the last mount wins."""
    mounts = {}
    with open("/proc/self/mountinfo") as info:
        for line in info:
            left, _, right = line.partition(" - ")
            parts = left.split()
            fs_parts = right.split()
            point = parts[4].replace("\\040", " ")
            mounts[point] = (set(parts[5].split(",")), fs_parts[0] if fs_parts else "",
                             fs_parts[2].split(",") if len(fs_parts) > 2 else [])
    return mounts


def errno_name(error):
    return errno.errorcode.get(error.errno, str(error.errno)) if error.errno else str(error)


def size_option(options):
    for option in options:
        if option.startswith("size="):
            text = option[5:]
            scale = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}.get(text[-1:].lower(), 1)
            return int(text.rstrip("kKmMgG")) * scale
    return None


def check_identity(audit):
    first, last = audit.config["uid_first"], audit.config["uid_last"]
    ruid, euid, suid = os.getresuid()
    rgid, egid, sgid = os.getresgid()
    groups = sorted(set(os.getgroups()) - {rgid})
    observed = f"uid {ruid}/{euid}/{suid} gid {rgid}/{egid}/{sgid} groups {groups}"
    ok = (len({ruid, euid, suid, rgid, egid, sgid}) == 1 and first <= ruid <= last
          and not groups)
    audit.report("uid_gid", ok, f"one uid = gid in {first}-{last}, no other group", observed)


def check_capabilities(audit):
    fields = status_fields()
    for key in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        value = fields.get(key)
        if key == "CapAmb" and not audit.expect["cap_amb_line"]:
            audit.report(f"capabilities_{key}", value is None, "no line (gVisor)",
                         value if value is not None else "no line")
            continue
        ok = value is not None and int(value, 16) == 0
        audit.report(f"capabilities_{key}", ok, "0000000000000000",
                     value if value is not None else "no line")


def check_no_new_privs(audit):
    wanted = audit.expect["no_new_privs_status"]
    value = status_fields().get("NoNewPrivs")
    audit.report("no_new_privs_status", value == wanted,
                 wanted if wanted is not None else "no line (gVisor)",
                 value if value is not None else "no line")
    value = audit.prctl(PR_GET_NO_NEW_PRIVS)
    audit.report("no_new_privs_prctl", value == "1", "1", value)


def check_seccomp(audit):
    wanted = audit.expect["seccomp_status"]
    value = status_fields().get("Seccomp")
    audit.report("seccomp_mode", value == wanted, wanted, value)


def check_rlimits(audit):
    for label, which, wanted in (
            ("open_files", resource.RLIMIT_NOFILE, audit.config["open_files_limit"]),
            ("processes", resource.RLIMIT_NPROC, audit.config["processes_limit"]),
            ("file_size", resource.RLIMIT_FSIZE, audit.config["file_size_limit_bytes"]),
            ("core_dumps", resource.RLIMIT_CORE, 0)):
        soft, hard = resource.getrlimit(which)
        audit.report(f"rlimit {label}", soft == hard == wanted, f"{wanted} (soft and hard)",
                     f"soft {soft} hard {hard}")


def check_root_read_only(audit):
    options = mountinfo().get("/", (set(),))[0]
    audit.report("root_mount_ro", "ro" in options, "ro", ",".join(sorted(options)))
    # /var/tmp is world-writable in the image: only the read-only mount can refuse the write.
    for path in ("/var/tmp/audit-probe", "/audit-probe"):
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.close(fd)
            os.unlink(path)
            observed = "created"
        except OSError as error:
            observed = errno_name(error)
        audit.report(f"write_refused {path}", observed in ("EROFS", "EACCES"),
                     "EROFS" if path.startswith("/var") else "EROFS or EACCES", observed)


def check_tmpfs_options(audit):
    mounts = mountinfo()
    for path, wanted in sorted(audit.config["tmpfs"].items()):
        if path not in mounts:
            audit.report(f"tmpfs_options {path}", False, "a tmpfs mount", "not mounted")
            continue
        options, fstype, super_options = mounts[path]
        flags = options | set(super_options)
        needed = {"noexec", "nosuid", "nodev"}
        if not audit.expect["tmpfs_flags_visible"]:
            needed = {"noexec"}
        size = size_option(super_options)
        missing = sorted(needed - flags)
        size_ok = size == wanted["size_bytes"] or (
            size is None and not audit.expect["tmpfs_flags_visible"])
        observed = (f"{fstype} {','.join(sorted(options))} size="
                    f"{size if size is not None else 'unshown'}")
        detail = f"missing {missing}" if missing else ""
        if missing and confined(audit):
            detail += "; confined by the launcher instead (nothing executes outside /usr)"
        audit.report(f"tmpfs_options {path}",
                     fstype == "tmpfs" and (not missing or confined(audit)) and size_ok,
                     f"tmpfs {','.join(sorted(needed))} size={wanted['size_bytes']}", observed,
                     detail)


def confined(audit):
    """Whether the launcher confined this sandbox (--confine: a scratch mount an engine could not
    flag, such as a Kubernetes emptyDir). Judged once: PID 1's command line carries --confine,
    and, by behaviour, /tmp lacks noexec and still a file copied there does not execute."""
    if audit.confined is None:
        with open("/proc/1/cmdline", "rb") as cmdline:
            flagged = b"--confine" in cmdline.read().split(b"\0")
        options, _, super_options = mountinfo().get("/tmp", (set(), "", []))
        audit.confined = (flagged and "noexec" not in options | set(super_options)
                          and exec_outcome("/tmp") == "EACCES")
    return audit.confined


def check_masked_paths(audit):
    for path in audit.config["masked_paths"]:
        try:
            if os.path.isdir(path):
                entries = os.listdir(path)
                observed = "empty directory" if not entries else f"lists {len(entries)} entries"
                ok = not entries
            else:
                with open(path, "rb") as masked:
                    data = masked.read(4096)
                observed = "reads empty" if not data else f"reads {len(data)} bytes"
                ok = not data
        except OSError as error:
            observed = errno_name(error)
            ok = error.errno in (errno.ENOENT, errno.EACCES, errno.EPERM, errno.ENOTDIR)
        audit.report(f"masked {path}", ok, "empty or inaccessible", observed)


def first_file(path):
    """path itself when it is not a directory, else its first regular file (a bounded walk)."""
    if not os.path.isdir(path):
        return path
    for directory, _, files in os.walk(path):
        for name in sorted(files):
            return os.path.join(directory, name)
    return None


def write_attempt(path):
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)  # opened but nothing written: that alone proves the path is writable
        return "opened for writing"
    except OSError as error:
        return errno_name(error)


def check_readonly_paths(audit):
    mounts = mountinfo()
    for path in audit.config["readonly_paths"]:
        if not os.path.exists(path):
            audit.report(f"read_only {path}", True, "read-only or absent", "absent")
            continue
        target = first_file(path)
        attempt = write_attempt(target) if target else "no file inside"
        if audit.expect["readonly_paths_mounted"]:
            mounted_ro = path in mounts and "ro" in mounts[path][0]
            observed = ("mounted ro" if mounted_ro else "not mounted ro") + f"; write {attempt}"
            audit.report(f"read_only {path}", mounted_ro and attempt != "opened for writing",
                         "mounted ro", observed)
        else:
            audit.report(f"read_only {path}", attempt != "opened for writing",
                         "write refused (gVisor's own procfs)", f"write {attempt}",
                         f"tried {target}")
    # A write into /proc/sys must fail even where the file mode would allow it.
    observed = write_attempt("/proc/sys/kernel/hostname")
    audit.report("write_refused /proc/sys/kernel/hostname", observed != "opened for writing",
                 "EROFS, EACCES or EPERM", observed)


def check_devices(audit):
    allowed = STANDARD_DEVICES | audit.expect["extra_devices"]
    found = []
    for directory, subdirs, files in os.walk("/dev"):
        relative = os.path.relpath(directory, "/dev")
        # /dev/shm and /dev/mqueue are the IPC mounts; /dev/fd links into /proc.
        subdirs[:] = [d for d in subdirs if os.path.join(relative, d).lstrip("./") not in (
            "shm", "mqueue", "fd")]
        for name in files + subdirs:
            path = os.path.join(directory, name)
            mode = os.lstat(path).st_mode
            if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
                found.append((os.path.relpath(path, "/dev"), stat.S_ISBLK(mode)))
    extra = sorted(name for name, block in found if block or name not in allowed)
    audit.report("devices_standard_only", not extra,
                 "only " + ",".join(sorted(allowed)),
                 ",".join(sorted(name for name, _ in found)),
                 f"unexpected {extra}" if extra else "")


def check_network(audit):
    names = sorted(name for _, name in socket.if_nameindex())
    audit.report("network_interfaces", names == ["lo"], "lo", ",".join(names))
    for label, family, address in (("tcp4_egress", socket.AF_INET, ("1.1.1.1", 443)),
                                   ("tcp6_egress", socket.AF_INET6, ("2606:4700:4700::1111", 443))):
        try:
            with socket.socket(family, socket.SOCK_STREAM) as conn:
                conn.settimeout(3)
                conn.connect(address)
            observed = "connected"
        except socket.timeout:
            observed = "timeout"
        except OSError as error:
            observed = errno_name(error)
        audit.report(label, observed not in ("connected", "timeout"),
                     "refused at once (no route)", observed)


def check_socket_families(audit):
    for label, family, kind in (("AF_VSOCK", AF_VSOCK, socket.SOCK_STREAM),
                                ("AF_PACKET", AF_PACKET, socket.SOCK_RAW),
                                ("AF_ALG", AF_ALG, socket.SOCK_SEQPACKET)):
        try:
            socket.socket(family, kind).close()
            observed = "OK"
        except OSError as error:
            observed = errno_name(error)
        wanted = audit.expect["socket_errno"][label]
        audit.report(f"socket {label}", observed in wanted, " or ".join(sorted(wanted)), observed)


def in_child(function):
    """Runs function() in a forked child, whose exit status carries the answer."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        try:
            answer = function()
        except BaseException as error:  # the child must never return into the audit
            answer = f"{type(error).__name__}"
        os.write(write_end, answer.encode())
        os._exit(0)
    os.close(write_end)
    chunks = []
    while chunk := os.read(read_end, 256):
        chunks.append(chunk)
    os.close(read_end)
    os.waitpid(pid, 0)
    return b"".join(chunks).decode()


def check_syscalls(audit):
    wanted = audit.expect["syscall_errno"]
    calls = {
        "io_uring_setup": lambda: audit.syscall("io_uring_setup", 1, None),
        "mount": lambda: audit.syscall("mount", b"none", b"/tmp", b"tmpfs", 0, None),
        # In a child: a success must not change the audit's own namespaces.
        "unshare_user": lambda: in_child(lambda: audit.syscall("unshare", CLONE_NEWUSER)),
        "keyctl": lambda: audit.syscall("keyctl", KEYCTL_GET_KEYRING_ID,
                                        KEY_SPEC_SESSION_KEYRING, 0),
        "bpf": lambda: audit.syscall("bpf", BPF_MAP_CREATE, None, 0),
        # A zeroed attribute block: counting CPU cycles of this process.
        "perf_event_open": lambda: audit.syscall(
            "perf_event_open", ctypes.create_string_buffer(128), 0, -1, -1, 0),
        "mknod": lambda: audit.syscall("mknodat", -100, b"/tmp/audit-null",
                                       stat.S_IFCHR | 0o600, os.makedev(1, 3)),
    }
    for name, call in calls.items():
        observed = call()
        if name == "mknod" and observed == "OK":
            os.unlink("/tmp/audit-null")
        audit.report(f"syscall {name}", observed in wanted[name],
                     " or ".join(sorted(wanted[name])), observed)


def check_pids_cap(audit):
    """RLIMIT_NPROC stops a fork past the cap with EAGAIN, under both runtimes (under runc the
    pids cgroup does too; under gVisor it caps the Sentry's host tasks, with room to spare)."""
    limit = audit.config["processes_limit"]
    read_end, write_end = os.pipe()
    children = []
    outcome = "no error"
    deadline = time.monotonic() + 30
    try:
        # Bounded: a few more than the cap, and 30 s.
        while len(children) < limit + 16 and time.monotonic() < deadline:
            try:
                pid = os.fork()
            except OSError as error:
                outcome = errno_name(error)
                break
            if pid == 0:
                os.close(write_end)
                os.read(read_end, 1)  # returns at EOF, when the parent closes the write end
                os._exit(0)
            children.append(pid)
    finally:
        os.close(write_end)
        os.close(read_end)
        for pid in children:
            os.waitpid(pid, 0)
    ok = outcome == "EAGAIN" and len(children) < limit
    audit.report("pids_cap", ok, f"EAGAIN before {limit} processes",
                 f"{outcome} after {len(children)} forks")


def check_pid1(audit):
    """PID 1 is the launcher, out of the program's reach: no signal, no ptrace, no memory."""
    try:
        with open("/proc/1/cmdline", "rb") as cmdline:
            argv = cmdline.read().split(b"\0")
    except OSError as error:
        argv = [errno_name(error).encode()]
    audit.report("pid1_launcher", argv[:3] == [b"/usr/bin/python3", b"-I", b"/opt/scs/launcher.py"],
                 "/usr/bin/python3 -I /opt/scs/launcher.py", b" ".join(argv[:3]).decode())
    for name, sig in (("SIGSTOP", signal.SIGSTOP), ("SIGKILL", signal.SIGKILL)):
        observed = audit.syscall("kill", 1, int(sig))
        audit.report(f"pid1_signal {name}", observed == "EPERM", "EPERM", observed)
    observed = audit.syscall("ptrace", PTRACE_SEIZE, 1, 0, 0)
    audit.report("pid1_ptrace", observed == "EPERM", "EPERM", observed)
    local = (ctypes.c_char * 8)()
    iovec = (ctypes.c_void_p * 2)(ctypes.cast(local, ctypes.c_void_p), 8)
    observed = audit.syscall("process_vm_readv", 1, iovec, 1, iovec, 1, 0)
    audit.report("pid1_memory", observed == "EPERM", "EPERM", observed)


def check_memfd_refused(audit):
    """memfd_create would give an executable file that no noexec mount covers."""
    observed = audit.syscall("memfd_create", b"audit", 0)
    audit.report("memfd_create", observed == "EPERM", "EPERM", observed)


def fill_until_full(directory, cap_bytes):
    """Writes 1 MiB blocks into files of at most 64 MiB (under RLIMIT_FSIZE) until ENOSPC;
    never more than cap + 8 MiB in all. Returns (errno name, bytes written)."""
    block = b"\0" * (1 << 20)
    written = 0
    outcome = "no error"
    paths = []
    try:
        while outcome == "no error" and written <= cap_bytes + (8 << 20):
            path = os.path.join(directory, f"audit-fill-{len(paths)}")
            paths.append(path)
            with open(path, "wb", buffering=0) as out:
                for _ in range(64):
                    try:
                        written += out.write(block)
                    except OSError as error:
                        outcome = errno_name(error)
                        break
    except OSError as error:
        outcome = errno_name(error)
    finally:
        for path in paths:
            if os.path.exists(path):
                os.unlink(path)
    return outcome, written


def check_tmpfs_caps(audit):
    for mount, wanted in sorted(audit.config["tmpfs"].items()):
        cap = wanted["size_bytes"]
        outcome, written = fill_until_full(mount, cap)
        # EFBIG would be RLIMIT_FSIZE, not the tmpfs cap: it must be ENOSPC, at the cap.
        ok = outcome == "ENOSPC" and written <= cap
        audit.report(f"tmpfs_size_cap {mount}", ok, f"ENOSPC at {cap} bytes or fewer",
                     f"{outcome} after {written} bytes")
    mount, wanted = "/tmp", audit.config["tmpfs"]["/tmp"]
    directory = os.path.join(mount, "audit-inodes")
    os.mkdir(directory)
    outcome = "no error"
    created = 0
    try:
        while created < wanted["max_inodes"] + 16:
            try:
                os.close(os.open(os.path.join(directory, str(created)), os.O_CREAT | os.O_WRONLY,
                                 0o600))
            except OSError as error:
                outcome = errno_name(error)
                break
            created += 1
    finally:
        shutil.rmtree(directory)
    capped = outcome == "ENOSPC" and created < wanted["max_inodes"]
    if audit.expect["tmpfs_inode_cap"] and not confined(audit):
        ok, expected = capped, f"ENOSPC before {wanted['max_inodes']} files"
    else:
        ok = capped or outcome == "no error"
        expected = ("no inode cap (an emptyDir, confined)" if confined(audit)
                    else "no inode cap (gVisor's tmpfs)") + "; bounded by the memory cap"
    audit.report(f"tmpfs_inode_cap {mount}", ok, expected, f"{outcome} after {created} files")


def exec_outcome(mount):
    """What executing a copy of /bin/true in `mount` gives: "executed", or the errno's name."""
    target = os.path.join(mount, "audit-true")
    shutil.copyfile("/bin/true", target)
    os.chmod(target, 0o755)
    try:
        pid = os.fork()
        if pid == 0:
            try:
                os.execv(target, [target])
            except OSError as error:
                os._exit(100 + error.errno if error.errno < 100 else 99)
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        return "executed" if code == 0 else (
            errno.errorcode.get(code - 100, str(code)) if code > 100 else f"exit {code}")
    finally:
        os.unlink(target)


def check_exec_refused(audit):
    for mount in sorted(audit.config["tmpfs"]):
        observed = exec_outcome(mount)
        audit.report(f"exec_refused {mount}", observed == "EACCES", "EACCES", observed)


# Files an engine may bind-mount from the host's disk into every sandbox: Docker's own (read-only
# or not writable by the sandbox's uid) and the kubelet's (writable, refused by the launcher's
# --confine).
HOST_FILES = ("/etc/hosts", "/etc/hostname", "/etc/resolv.conf", "/dev/termination-log")


def check_host_files(audit):
    for path in HOST_FILES:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND)
            os.close(fd)
            observed = "opened for writing"
        except OSError as error:
            observed = errno_name(error)
        audit.report(f"host_file_unwritable {path}",
                     observed in ("EACCES", "EROFS", "EPERM", "ENOENT"),
                     "EACCES, EROFS or EPERM (or absent)", observed)


CHECKS = [
    ("uid_gid", check_identity),
    ("capabilities", check_capabilities),
    ("no_new_privs", check_no_new_privs),
    ("seccomp_mode", check_seccomp),
    ("rlimits", check_rlimits),
    ("root_read_only", check_root_read_only),
    ("tmpfs_options", check_tmpfs_options),
    ("masked_paths", check_masked_paths),
    ("readonly_paths", check_readonly_paths),
    ("devices", check_devices),
    ("network", check_network),
    ("socket_families", check_socket_families),
    ("syscalls", check_syscalls),
    ("exec_refused", check_exec_refused),
    ("host_files", check_host_files),
    ("tmpfs_caps", check_tmpfs_caps),
    ("pids_cap", check_pids_cap),
    ("pid1", check_pid1),
    ("memfd", check_memfd_refused),
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
