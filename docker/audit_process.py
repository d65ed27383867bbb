"""The audit's checks of the process and the kernel interfaces it reaches: identity, capabilities,
no_new_privs, seccomp mode, rlimits, network, socket families, refused system calls, the process
cap, PID 1 and memfd_create. Sent beside main.py (docker/audit.py), which runs them."""

import ctypes
import errno
import os
import resource
import signal
import socket
import stat
import time

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
NETLINK_ROUTE = 0


def status_fields():
    fields = {}
    with open("/proc/self/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    return fields



def errno_name(error):
    return errno.errorcode.get(error.errno, str(error.errno)) if error.errno else str(error)



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



def socket_outcome(family, kind, protocol=0):
    """"OK", or the errno name of socket()."""
    try:
        socket.socket(family, kind, protocol).close()
        return "OK"
    except OSError as error:
        return errno_name(error)


def check_egress(audit):
    """Egress (audit.json's egress: the audit's tenant has hosts it may reach): then PID 1's relay
    listens on 127.0.0.1:3128, the proxy variables name it, and what it carries is the server's
    to decide (a CONNECT to a host no policy allows comes back 403 from the server). Without:
    nothing listens there and no proxy variable is set."""
    names = sorted(name for name in os.environ if name.upper().endswith("_PROXY"))
    try:
        with socket.create_connection(("127.0.0.1", 3128), timeout=5) as conn:
            conn.settimeout(15)
            conn.sendall(b"CONNECT audit.invalid:443 HTTP/1.1\r\n\r\n")
            answer = conn.recv(256).split(b"\r\n", 1)[0].decode("ascii", "replace")
    except OSError as error:
        answer = errno_name(error)
    if audit.config.get("egress", False):
        audit.report("egress_relay", answer.startswith("HTTP/1.1 403")
                     and os.environ.get("HTTPS_PROXY") == "http://127.0.0.1:3128",
                     "the relay, answered by the server's policy (403)",
                     f"{answer}; HTTPS_PROXY={os.environ.get('HTTPS_PROXY')}")
    else:
        # --no-network (a Pod): the program's filter refuses the socket itself.
        refused = "EACCES" if audit.config.get("ip_sockets_refused", False) else "ECONNREFUSED"
        audit.report("egress_relay", answer == refused and not names,
                     "no relay, no proxy variable", f"{answer}; {','.join(names) or 'none'}")


def check_network(audit):
    """Only lo, or, where the engine leaves an interface (a Pod's eth0) and the launcher's
    --no-network refuses the program every socket but AF_UNIX (audit.json's ip_sockets_refused),
    that refusal: EACCES for each family that reaches an interface or configures one."""
    if audit.config.get("ip_sockets_refused", False):
        observed = {label: socket_outcome(family, kind, protocol)
                    for label, family, kind, protocol in (
                        ("AF_INET", socket.AF_INET, socket.SOCK_STREAM, 0),
                        ("AF_INET6", socket.AF_INET6, socket.SOCK_STREAM, 0),
                        ("AF_NETLINK", socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_ROUTE),
                        ("AF_PACKET", AF_PACKET, socket.SOCK_RAW, 0))}
        audit.report("ip_sockets_refused", set(observed.values()) == {"EACCES"},
                     "EACCES for AF_INET, AF_INET6, AF_NETLINK and AF_PACKET",
                     ", ".join(f"{label} {outcome}" for label, outcome in observed.items()))
    else:
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
        observed = socket_outcome(family, kind)
        wanted = audit.expect["socket_errno"][label]
        if audit.config.get("ip_sockets_refused", False):
            # --no-network: the program's filter, newer than the engine's, has its errno win.
            wanted = wanted | {"EACCES"}
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
