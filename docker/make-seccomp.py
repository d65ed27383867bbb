#!/usr/bin/env python3
"""Derive docker/seccomp.json from the Docker engine's own default seccomp profile.

Source (never hand-written): the Debian 12 package golang-github-docker-docker-dev
20.10.24+dfsg1-1+deb12u1, file
  /usr/share/gocode/src/github.com/docker/docker/profiles/seccomp/default.json
which is the profile built into Debian's docker.io 20.10.24 engine (same source package).
Its sha256 is pinned below; pass --any-source to derive from another version on purpose.

Usage:
  docker/make-seccomp.py                     # apt-get download the package, write docker/seccomp.json
  docker/make-seccomp.py --source FILE       # FILE is default.json or the .deb itself
  docker/make-seccomp.py --check             # exit 1 when docker/seccomp.json is not up to date

Changes made to the default, and nothing else:
  1. io_uring_setup, io_uring_enter and io_uring_register are removed from every rule, so they
     fall to the default action (EPERM). Debian's 20.10 allows them; upstream blocks them since 25.0.
  2. socket() is removed from the unconditional allow list and allowed only when its first
     argument equals AF_UNIX (1), AF_INET (2), AF_INET6 (10) or AF_NETLINK (16). Every other family
     (AF_ALG 38, AF_VSOCK 40, AF_PACKET 17, ...) falls to the default action: EPERM. Equality is an
     allowlist on the whole 64-bit register, so a family with high bits set is refused as well
     (upstream's "!= 40" rule would let 0x100000028 through, which the kernel truncates to 40).
  3. socketcall is removed: on x86 the 32-bit socketcall() multiplexer passes the family in user
     memory, which seccomp cannot inspect, so it would bypass rule 2 (a 64-bit process can still
     enter the 32-bit syscall table with int 0x80). 64-bit libc never uses it.
The arch map, the capability-conditional rules and every other rule are kept as they are.
"""

import argparse
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile

PACKAGE = "golang-github-docker-docker-dev"
PACKAGE_VERSION = "20.10.24+dfsg1-1+deb12u1"
MEMBER = "./usr/share/gocode/src/github.com/docker/docker/profiles/seccomp/default.json"
SOURCE_SHA256 = "e5e91f884647e7332b3f89280777752f563df4f1372a186f14ddb7bf2f55cf61"

REMOVED = {"io_uring_setup", "io_uring_enter", "io_uring_register", "socket", "socketcall"}
SOCKET_FAMILIES = [(1, "AF_UNIX"), (2, "AF_INET"), (10, "AF_INET6"), (16, "AF_NETLINK")]

HERE = os.path.dirname(os.path.abspath(__file__))
OUTPUT = os.path.join(HERE, "seccomp.json")


def read_from_deb(path):
    data = subprocess.run(
        ["dpkg-deb", "--fsys-tarfile", path], check=True, stdout=subprocess.PIPE
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return tar.extractfile(MEMBER).read()


def download_source():
    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o755)  # apt's _apt user downloads into it
        subprocess.run(
            ["apt-get", "download", "-q", f"{PACKAGE}={PACKAGE_VERSION}"],
            cwd=tmp, check=True, stdout=sys.stderr,
        )
        debs = [name for name in os.listdir(tmp) if name.endswith(".deb")]
        return read_from_deb(os.path.join(tmp, debs[0]))


def derive(default):
    profile = json.loads(default)
    rules = []
    for rule in profile["syscalls"]:
        names = [name for name in rule["names"] if name not in REMOVED]
        if names:
            rules.append(dict(rule, names=names))
    for family, name in SOCKET_FAMILIES:
        rules.append({
            "names": ["socket"],
            "action": "SCMP_ACT_ALLOW",
            "args": [{"index": 0, "value": family, "op": "SCMP_CMP_EQ"}],
            "comment": f"safe-code-sandbox: socket({name}) only",
            "includes": {},
            "excludes": {},
        })
    profile["syscalls"] = rules
    return json.dumps(profile, indent="\t") + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", help="default.json or the .deb that contains it")
    parser.add_argument("--out", default=OUTPUT)
    parser.add_argument("--any-source", action="store_true", help="skip the sha256 pin")
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args()

    if args.source is None:
        default = download_source()
    elif args.source.endswith(".deb"):
        default = read_from_deb(args.source)
    else:
        with open(args.source, "rb") as f:
            default = f.read()
    digest = hashlib.sha256(default).hexdigest()
    if digest != SOURCE_SHA256 and not args.any_source:
        sys.exit(f"make-seccomp: source sha256 {digest} is not the pinned {SOURCE_SHA256}")

    text = derive(default)
    if args.check:
        with open(args.out) as f:
            if f.read() != text:
                sys.exit(f"make-seccomp: {args.out} is out of date")
        return
    with open(args.out, "w") as f:
        f.write(text)
    print(f"make-seccomp: wrote {args.out} from {PACKAGE} {PACKAGE_VERSION}", file=sys.stderr)


if __name__ == "__main__":
    main()
