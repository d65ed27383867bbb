"""The run's bundle: an uncompressed ustar the server built, checked again here because an
engine's own extraction trusts tar headers. Only regular files and directories, with fixed
modes and no links of any kind, go to /workspace; members under protocol.CONTROL_DIRECTORY (the
control file and the run's stdin) are kept in memory and never written to disk."""

import json
import os
import re
import stat
import tarfile

from . import languages, protocol
from .rejection import Rejected

WORKSPACE = "/workspace"
ALLOWED_TYPES = (tarfile.REGTYPE, tarfile.AREGTYPE, tarfile.DIRTYPE)
CONTROL_MEMBERS = (protocol.CONTROL_FILE, protocol.STDIN_FILE)
CHUNK = 1 << 16
MAX_CONTROL_BYTES = 1 << 16
MAX_NAME_BYTES = 255
# The workspace belongs to the sandbox's uid; PID 1 has that uid and may give itself back the
# access a session's code took away (chmod 0o555 /workspace) before it places a run's files.
OWNER_ACCESS = stat.S_IRWXU


def checked_parts(name):
    if not name or name.startswith("/"):
        raise Rejected(f"absolute or empty path {name!r}")
    parts = name.split("/")
    for part in parts:
        if part in ("", ".", ".."):
            raise Rejected(f"path {name!r}: empty, '.' or '..' component")
        if "\\" in part or len(os.fsencode(part)) > MAX_NAME_BYTES:
            raise Rejected(f"path {name!r}: bad or over-long component")
    return parts


def make_dir(path, repair):
    """A directory at `path`; with `repair`, one that exists is made usable by its owner."""
    try:
        os.mkdir(path, 0o755)
        return
    except FileExistsError:
        pass
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode):
        raise Rejected(f"{path!r} exists and is not a directory")
    if repair and info.st_mode & OWNER_ACCESS != OWNER_ACCESS:
        os.chmod(path, stat.S_IMODE(info.st_mode) | OWNER_ACCESS)


def write_file(path, source, replace):
    if replace:
        try:
            info = os.lstat(path)
            if stat.S_ISDIR(info.st_mode):
                raise Rejected(f"{path!r} is a directory")
            os.unlink(path)  # a file, symlink or FIFO an earlier run left: replaced, never followed
        except FileNotFoundError:
            pass
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o644)
    except FileExistsError:
        raise Rejected(f"duplicate member {path!r}") from None
    with os.fdopen(fd, "wb") as out:
        while chunk := source.read(CHUNK):
            out.write(chunk)


def unpack(stream, replace=False):
    """Writes the bundle read from `stream` to /workspace; returns the control members, kept in
    memory, and the names of the files written (require_code() checks the code is one). With
    `replace` (a session's later runs) a regular file already there is replaced and the
    directories on the way are given back to their owner. Raises Rejected for a bundle that
    breaks a rule or cannot be placed (OSError included: a full workspace, a directory the code
    made where a file goes)."""
    seen = set()
    control = {}
    try:
        if replace:
            make_dir(WORKSPACE, repair=True)
        with tarfile.open(fileobj=stream, mode="r|") as tar:
            for member in tar:
                if member.type not in ALLOWED_TYPES:
                    raise Rejected(f"member {member.name!r}: type {member.type!r} is not a file or"
                                   " directory")
                parts = checked_parts(member.name)
                if parts[0] == protocol.CONTROL_DIRECTORY:
                    if member.isdir() and len(parts) == 1:
                        continue
                    if member.isdir() or len(parts) != 2 or parts[1] not in CONTROL_MEMBERS:
                        raise Rejected(f"member {member.name!r}: unknown control member")
                    if parts[1] in control:
                        raise Rejected(f"duplicate member {member.name!r}")
                    control[parts[1]] = tar.extractfile(member).read()
                    continue
                path = WORKSPACE
                for part in parts[:-1]:
                    path = os.path.join(path, part)
                    make_dir(path, replace)
                path = os.path.join(path, parts[-1])
                if member.isdir():
                    make_dir(path, replace)
                    continue
                if member.name in seen:
                    raise Rejected(f"duplicate member {member.name!r}")
                seen.add(member.name)
                write_file(path, tar.extractfile(member), replace)
    except (tarfile.TarError, EOFError, UnicodeError) as error:
        raise Rejected(f"bundle: {error}") from None
    except OSError as error:
        raise Rejected(f"bundle: cannot place a file: {error}") from None
    return control, seen


def require_code(names, language):
    """Raises Rejected unless the bundle's files `names` hold the code of `language`."""
    if languages.CODE_FILES[language] not in names:
        raise Rejected(f"bundle: no {languages.CODE_FILES[language]}")


def control_members(data):
    """The control members of a bundle held in memory, read without writing anything: a
    session's run learns its nonce before anything of the bundle can fail to be placed."""
    import io

    control = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r|") as tar:
            for member in tar:
                parts = member.name.split("/")
                if (member.isreg() and len(parts) == 2 and parts[0] == protocol.CONTROL_DIRECTORY
                        and parts[1] in CONTROL_MEMBERS and parts[1] not in control):
                    control[parts[1]] = tar.extractfile(member).read()
    except (tarfile.TarError, EOFError, UnicodeError) as error:
        raise Rejected(f"bundle: {error}") from None
    return control


def egress_nonce(control):
    """The run's egress nonce (read_control() checked its form), or None without egress."""
    return control.get(protocol.CONTROL_EGRESS) if control else None


PEM_CERTIFICATE = re.compile(
    r"-----BEGIN CERTIFICATE-----\n[A-Za-z0-9+/=\n]{1,16384}-----END CERTIFICATE-----\n?")
PLACEHOLDER_VARIABLE = re.compile(r"[A-Z_][A-Z0-9_]{0,127}")
PLACEHOLDER = re.compile(r"scs-placeholder-[0-9a-f]{32}")
# Variables a placeholder may never take the name of: what PID 1 sets, or what changes how a
# program or its interpreter loads (the server refuses the same names: credentials.cc).
RESERVED_VARIABLES = frozenset((
    "PATH", "HOME", "USER", "SHELL", "TMPDIR", "LANG", "TERM", "PWD", "TZ", "IFS", "ENV",
    "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE", "MPLBACKEND", "PERL5OPT", "RUBYOPT", "JAVA_TOOL_OPTIONS"))
RESERVED_PREFIXES = ("LD_", "PYTHON", "NODE_", "BASH", "SCS_", "LC_", "GIT_", "PIP_", "SSL_",
                     "OPENSSL_", "GLIBC_", "GCONV_")


def reserved_variable(name):
    return name in RESERVED_VARIABLES or name.startswith(RESERVED_PREFIXES)


def brokering_well_formed(control):
    """The brokering CA and placeholders (issue 48), when present: only beside an egress nonce,
    a CA one PEM certificate, placeholders a name and the server's placeholder form."""
    ca = control.get(protocol.CONTROL_EGRESS_CA)
    environment = control.get(protocol.CONTROL_EGRESS_ENVIRONMENT)
    if (ca is not None or environment is not None) and protocol.CONTROL_EGRESS not in control:
        return False
    if ca is not None and not (isinstance(ca, str) and PEM_CERTIFICATE.fullmatch(ca)):
        return False
    if environment is not None and not (
            isinstance(environment, dict) and len(environment) <= 64
            and all(isinstance(value, str) and PLACEHOLDER_VARIABLE.fullmatch(name)
                    and not reserved_variable(name) and PLACEHOLDER.fullmatch(value)
                    for name, value in environment.items())):
        return False
    return True


def read_control(raw):
    """The control file, checked; None when the bundle had none."""
    if raw is None:
        return None
    if len(raw) > MAX_CONTROL_BYTES:
        raise Rejected("bundle: control file too large")
    try:
        control = json.loads(raw)
    except (ValueError, RecursionError):
        raise Rejected("bundle: control file is not JSON") from None
    caps = (protocol.CONTROL_MAX_FILES, protocol.CONTROL_MAX_FILE_BYTES,
            protocol.CONTROL_MAX_TOTAL_BYTES)
    watchdog = control.get(protocol.CONTROL_WATCHDOG) if isinstance(control, dict) else None
    result_cap = control.get(protocol.CONTROL_RESULT_CAP, 64) if isinstance(control, dict) else 0
    if (
        not isinstance(control, dict)
        or not isinstance(control.get(protocol.CONTROL_NONCE), str)
        or not re.fullmatch(r"[0-9a-f]{32}", control[protocol.CONTROL_NONCE])
        or not isinstance(control.get(protocol.CONTROL_OUT_DIR), str)
        or not control[protocol.CONTROL_OUT_DIR].startswith(WORKSPACE + "/")
        or any(type(control.get(cap)) is not int or control[cap] < 0 for cap in caps)
        or (watchdog is not None and (type(watchdog) is not int or watchdog <= 0))
        or type(result_cap) is not int or result_cap < 64
        or (protocol.CONTROL_EGRESS in control and not (
            isinstance(control[protocol.CONTROL_EGRESS], str)
            and re.fullmatch(r"[0-9a-f]{32}", control[protocol.CONTROL_EGRESS])))
        or not brokering_well_formed(control)
    ):
        raise Rejected("bundle: control file is malformed")
    return control


def make_out_dir(path):
    try:
        os.mkdir(path, 0o755)
    except FileExistsError:
        pass  # sent in `files`, or left by a session's run: collected only if it is a directory
