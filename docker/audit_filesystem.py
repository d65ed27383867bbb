"""The audit's checks of the filesystem: the read-only root, the scratch mounts' options and caps,
masked and read-only paths, devices, exec from scratch space, the languages' interpreters and the
files an engine mounts from the host. Sent beside main.py (docker/audit.py), which runs them."""

import errno
import os
import shutil
import stat

from audit_process import errno_name

# The device nodes a sandbox may hold: the engine's standard set.
STANDARD_DEVICES = {"null", "zero", "full", "random", "urandom", "tty", "ptmx", "pts/ptmx",
                    "console"}


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



def size_option(options):
    for option in options:
        if option.startswith("size="):
            text = option[5:]
            scale = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}.get(text[-1:].lower(), 1)
            return int(text.rstrip("kKmMgG")) * scale
    return None



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


# The interpreters of the languages a run may be in (docker/scs_launcher/languages.py); Node.js
# is absent from the minimal flavour. The directories the image keeps programs in.
INTERPRETERS = ("/usr/bin/python3", "/usr/bin/bash", "/usr/bin/node")
PROGRAM_DIRECTORIES = ("/usr/bin", "/usr/sbin", "/usr/libexec", "/usr/local/bin")


def check_interpreters(audit):
    """Every language's interpreter (and the files and directories it resolves through) is
    root's, not writable by the sandbox's uid, and neither setuid nor setgid; no program of the
    image's program directories is setuid or setgid."""
    for path in INTERPRETERS:
        if not os.path.lexists(path):
            audit.report(f"interpreter {path}", path == "/usr/bin/node", "present, root's,"
                         " unwritable, not setuid (Node.js may be absent)", "absent")
            continue
        problems = []
        real = os.path.realpath(path)
        for each in (path, real, os.path.dirname(real)):
            info = os.stat(each)
            if info.st_uid != 0 or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
                problems.append(f"{each} is uid {info.st_uid}, mode {info.st_mode & 0o7777:o}")
            if os.access(each, os.W_OK):
                problems.append(f"{each} is writable")
            if info.st_mode & (stat.S_ISUID | stat.S_ISGID):
                problems.append(f"{each} is setuid or setgid")
        audit.report(f"interpreter {path}", not problems, "root's, unwritable, not setuid",
                     "; ".join(problems) or f"{real}: root's, unwritable, not setuid")
    privileged = []
    for directory in PROGRAM_DIRECTORIES:
        for root, _, names in os.walk(directory):
            for name in names:
                info = os.lstat(os.path.join(root, name))
                if stat.S_ISREG(info.st_mode) and info.st_mode & (stat.S_ISUID | stat.S_ISGID):
                    privileged.append(os.path.join(root, name))
    audit.report("no_setuid_programs", not privileged, "none", ", ".join(privileged[:8]) or "none",
                 " ".join(PROGRAM_DIRECTORIES))


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
