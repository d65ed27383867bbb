"""Puts docker/ on sys.path, so that the tests import the launcher's package as the image holds
it, and gives each test a workspace of its own in place of /workspace."""

import io
import os
import subprocess
import sys
import tarfile
import tempfile

DOCKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docker")
sys.path.insert(0, os.path.abspath(DOCKER))


def tar_bytes(members):
    """An uncompressed ustar as the core builds one: (name, bytes) for files, (name, None) for
    directories, (name, TarInfo) for anything else."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, content in members:
            if isinstance(content, tarfile.TarInfo):
                content.name = name
                tar.addfile(content)
            elif content is None:
                info = tarfile.TarInfo(name)
                info.type = tarfile.DIRTYPE
                info.mode = 0o755
                tar.addfile(info)
            else:
                info = tarfile.TarInfo(name)
                info.size = len(content)
                info.mode = 0o644
                tar.addfile(info, io.BytesIO(content))
    return out.getvalue()


class Workspace:
    """A temporary directory that stands in for /workspace in the modules that name it."""

    def __init__(self, *modules):
        self.modules = modules

    def __enter__(self):
        self.temp = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.temp.name, "workspace")
        os.mkdir(self.path, 0o700)
        self.saved = [(m, m.WORKSPACE) for m in self.modules]
        for module in self.modules:
            module.WORKSPACE = self.path
        return self.path

    def __exit__(self, *_):
        for module, value in self.saved:
            module.WORKSPACE = value
        # The tests build trees deeper than Python's own walks can go.
        subprocess.run(["chmod", "-R", "u+rwx", self.temp.name], check=True)
        subprocess.run(["rm", "-rf", self.temp.name], check=True)
