"""Sandbox launcher: unpack the run's bundle from stdin into /workspace, then exec main.py.

Runs as uid 10001 under `python3 -I`, before any user code. The bundle is an uncompressed ustar
built by the server; it is checked again here because Docker's own extraction trusts tar headers.
Only regular files and directories are accepted, with fixed modes and no links of any kind.
Any violation exits 125 with "sandbox launcher: rejected <why>" on stderr.
"""

import os
import stat
import sys
import tarfile

WORKSPACE = "/workspace"
ALLOWED_TYPES = (tarfile.REGTYPE, tarfile.AREGTYPE, tarfile.DIRTYPE)
CHUNK = 1 << 16


def reject(why):
    sys.stderr.write(f"sandbox launcher: rejected {why}\n")
    sys.stderr.flush()
    os._exit(125)


def checked_parts(name):
    if not name or name.startswith("/"):
        reject(f"absolute or empty path {name!r}")
    parts = name.split("/")
    for part in parts:
        if part in ("", ".", ".."):
            reject(f"path {name!r}: empty, '.' or '..' component")
        if "\\" in part or len(os.fsencode(part)) > 255:
            reject(f"path {name!r}: bad or over-long component")
    return parts


def make_dir(path):
    try:
        os.mkdir(path, 0o755)
    except FileExistsError:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            reject(f"{path!r} exists and is not a directory")


def write_file(path, source):
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    with os.fdopen(fd, "wb") as out:
        while chunk := source.read(CHUNK):
            out.write(chunk)


def unpack(stream):
    seen_main = False
    with tarfile.open(fileobj=stream, mode="r|") as tar:
        for member in tar:
            if member.type not in ALLOWED_TYPES:
                reject(f"member {member.name!r}: type {member.type!r} is not a file or directory")
            parts = checked_parts(member.name)
            path = WORKSPACE
            for part in parts[:-1]:
                path = os.path.join(path, part)
                make_dir(path)
            path = os.path.join(path, parts[-1])
            if member.isdir():
                make_dir(path)
                continue
            try:
                write_file(path, tar.extractfile(member))
            except FileExistsError:
                reject(f"duplicate member {member.name!r}")
            seen_main = seen_main or member.name == "main.py"
    if not seen_main:
        reject("bundle: no main.py")


def main():
    os.umask(0o022)
    try:
        # Unbuffered, so that the end-of-archive block is seen even while stdin stays open.
        unpack(sys.stdin.buffer.raw)
    except (tarfile.TarError, OSError, EOFError, UnicodeError) as error:
        reject(f"bundle: {error}")
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.chdir(WORKSPACE)
    os.execv("/usr/bin/python3", ["python3", "-I", "main.py"])


if __name__ == "__main__":
    main()
