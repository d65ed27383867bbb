#!/usr/bin/env python3
"""Writes the wheels the package tests install (issue 29), made here so that no test needs an
index on the network: `make_wheels.py OUT [--native] [--index]`.

- purepkg 1.0 and 2.0: pure Python; its module says its version (purepkg.VERSION), and 2.0 ships
  a .pth file that marks the interpreter which read it (sys.scs_pth_seen), as some packages'
  do.
- needsold 1.0: needs purepkg<2, so that it conflicts with purepkg==2.0.
- winonly 1.0: a CPython 3.11 wheel for Windows only: no wheel for the sandbox's platform.
- longpath 1.0: a file whose name is longer than a tar header holds (120 bytes).
- cext 1.0 (--native): a C extension, compiled here with the host's gcc against the CPython
  3.11 headers (python3-dev) as a manylinux wheel: cext.add(a, b).
- --host NAME... (for the benchmark): a pure-Python wheel of each host module NAME as Debian
  installed it (/usr/lib/python3/dist-packages), its version the host's: real code of a real
  size, where no index is reachable; and padN 1.0 for N in 1..--pads (tiny projects that make
  each set of a round a new one); --big MB: bigpkg 1.0, whose module carries MB MiB of random
  bytes, the size of a compiled library such as polars'.
- --bomb MB: bombpkg 1.0, whose one member is MB MiB of zeros that deflate to about a
  thousandth of that: a zip bomb as a wheelhouse or an index could serve one.
- --index: OUT/simple/<project>/index.html for each project, a PEP 503 simple index whose links
  carry each wheel's sha256, as a real index's do, served by any static HTTP server.

Wheels are zip files with a dist-info (METADATA, WHEEL, RECORD): what pip installs, and all it
reads. Prints the wheel files it wrote, one per line."""

import base64
import hashlib
import html
import os
import platform
import subprocess
import sys
import sysconfig
import tempfile
import zipfile


def wheel(out, name, version, files, requires=(), tag="py3-none-any"):
    info = f"{name}-{version}.dist-info"
    pure = tag.endswith("-none-any")
    members = dict(files)
    members[f"{info}/METADATA"] = (
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        "Summary: a wheel of Safe Code Sandbox's tests\n"
        + "".join(f"Requires-Dist: {r}\n" for r in requires))
    members[f"{info}/WHEEL"] = (
        f"Wheel-Version: 1.0\nGenerator: make_wheels\nRoot-Is-Purelib: {str(pure).lower()}\n"
        f"Tag: {tag}\n")
    record = []
    for path, content in members.items():
        data = content.encode() if isinstance(content, str) else content
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{info}/RECORD,,")
    members[f"{info}/RECORD"] = "\n".join(record) + "\n"
    path = os.path.join(out, f"{name}-{version}-{tag}.whl")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for member, content in members.items():
            archive.writestr(member, content)
    return path


C_SOURCE = r"""
#include <Python.h>
static PyObject* add(PyObject* self, PyObject* args) {
  long a, b;
  if (!PyArg_ParseTuple(args, "ll", &a, &b)) return NULL;
  return PyLong_FromLong(a + b);
}
static PyMethodDef methods[] = {{"add", add, METH_VARARGS, "a + b, in C"}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "cext", NULL, -1, methods};
PyMODINIT_FUNC PyInit_cext(void) { return PyModule_Create(&module); }
"""


def bomb_wheel(out, mib):
    """bombpkg 1.0 with one member of `mib` MiB of zeros, written a MiB at a time."""
    name, version = "bombpkg", "1.0"
    info = f"{name}-{version}.dist-info"
    chunk = bytes(1 << 20)
    digest = hashlib.sha256()
    for _ in range(mib):
        digest.update(chunk)
    payload = base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode()
    small = {
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: make_wheels\nRoot-Is-Purelib: true\n"
                         "Tag: py3-none-any\n",
    }
    record = [f"bombpkg/zeros.bin,sha256={payload},{mib << 20}"]
    for path, content in small.items():
        d = base64.urlsafe_b64encode(hashlib.sha256(content.encode()).digest()).rstrip(b"=")
        record.append(f"{path},sha256={d.decode()},{len(content)}")
    record.append(f"{info}/RECORD,,")
    small[f"{info}/RECORD"] = "\n".join(record) + "\n"
    path = os.path.join(out, f"{name}-{version}-py3-none-any.whl")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        with archive.open("bombpkg/zeros.bin", "w", force_zip64=True) as member:
            for _ in range(mib):
                member.write(chunk)
        for member, content in small.items():
            archive.writestr(member, content)
    return path


def native_wheel(out):
    """cext, built against the headers of CPython 3.11 (the sandbox's, and Debian's here)."""
    include = subprocess.run(
        ["/usr/bin/python3.11", "-c", "import sysconfig; print(sysconfig.get_paths()['include'])"],
        check=True, capture_output=True, text=True).stdout.strip()
    arch = platform.machine()
    with tempfile.TemporaryDirectory() as work:
        source = os.path.join(work, "cext.c")
        library = os.path.join(work, "cext.so")
        with open(source, "w") as f:
            f.write(C_SOURCE)
        subprocess.run(["gcc", "-shared", "-fPIC", "-O2", f"-I{include}", source, "-o", library],
                       check=True)
        with open(library, "rb") as f:
            binary = f.read()
    return wheel(out, "cext", "1.0", {f"cext.cpython-311-{arch}-linux-gnu.so": binary},
                 tag=f"cp311-cp311-manylinux_2_17_{arch}")


def host_wheel(out, name):
    """A wheel of the host's module `name`, as Debian installed it, without its bytecode."""
    import importlib.metadata

    root = "/usr/lib/python3/dist-packages"
    version = importlib.metadata.version(name)
    files = {}
    for directory, subdirectories, names in os.walk(os.path.join(root, name)):
        subdirectories[:] = [d for d in subdirectories if d != "__pycache__"]
        for file in names:
            path = os.path.join(directory, file)
            with open(path, "rb") as f:
                files[os.path.relpath(path, root)] = f.read()
    return wheel(out, name, version, files)


def index(out, wheels):
    """A PEP 503 simple index of `wheels` under out/simple."""
    projects = {}
    for path in wheels:
        projects.setdefault(os.path.basename(path).split("-")[0], []).append(path)
    for project, paths in projects.items():
        directory = os.path.join(out, "simple", project)
        os.makedirs(directory, exist_ok=True)
        links = []
        for path in sorted(paths):
            file = os.path.basename(path)
            with open(path, "rb") as f:
                digest = hashlib.sha256(f.read()).hexdigest()
            os.link(path, os.path.join(directory, file))
            links.append(f'<a href="{html.escape(file)}#sha256={digest}">{html.escape(file)}</a>')
        with open(os.path.join(directory, "index.html"), "w") as f:
            f.write("<!DOCTYPE html><html><body>\n" + "<br>\n".join(links) + "\n</body></html>\n")


def main(argv):
    out = argv[1]
    os.makedirs(out, exist_ok=True)
    wheels = [
        wheel(out, "purepkg", "1.0", {"purepkg/__init__.py": 'VERSION = "1.0"\n'}),
        wheel(out, "purepkg", "2.0", {
            "purepkg/__init__.py": 'VERSION = "2.0"\n',
            "purepkg_probe.pth": "import sys; sys.scs_pth_seen = True\n",
        }),
        wheel(out, "needsold", "1.0", {"needsold/__init__.py": ""}, requires=["purepkg<2"]),
        wheel(out, "winonly", "1.0", {"winonly/__init__.py": ""}, tag="cp311-cp311-win_amd64"),
        wheel(out, "longpath", "1.0", {"longpath/__init__.py": "",
                                       "longpath/" + "n" * 117 + ".py": ""}),
    ]
    if "--native" in argv:
        wheels.append(native_wheel(out))
    if "--host" in argv:
        at = argv.index("--host") + 1
        while at < len(argv) and not argv[at].startswith("--"):
            wheels.append(host_wheel(out, argv[at]))
            at += 1
    if "--big" in argv:
        size = int(argv[argv.index("--big") + 1]) << 20
        wheels.append(wheel(out, "bigpkg", "1.0", {"bigpkg/__init__.py": "import os\n",
                                                   "bigpkg/_library.bin": os.urandom(size)}))
    if "--bomb" in argv:
        wheels.append(bomb_wheel(out, int(argv[argv.index("--bomb") + 1])))
    if "--pads" in argv:
        for n in range(1, int(argv[argv.index("--pads") + 1]) + 1):
            wheels.append(wheel(out, f"pad{n}", "1.0", {f"pad{n}/__init__.py": f"N = {n}\n"}))
    if "--index" in argv:
        index(out, wheels)
    for path in wheels:
        print(path)


if __name__ == "__main__":
    main(sys.argv)
