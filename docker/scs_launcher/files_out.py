"""The files a run returns: the regular files under its out directory, never following a
symlink, within the control file's caps. The walk is iterative and bounded (depth, directories,
entries): the tree is the program's, and it may be as deep or as wide as the program likes."""

import os
import stat

MAX_DEPTH = 32
MAX_DIRECTORIES = 1024
MAX_ENTRIES = 16384
OPEN_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class Walk:
    """The regular files under a directory, depth first in name order (a directory's files,
    then its subdirectories), as (path, dir_fd, name, stat_result). `skipped` counts what was
    not looked at: a directory past a bound, an entry that vanished or could not be read."""

    def __init__(self, root):
        self.root = root
        self.skipped = 0

    def __iter__(self):
        try:
            root_fd = os.open(self.root, OPEN_DIRECTORY)
        except OSError:
            return
        # Each level holds its directory's fd and the subdirectories still to visit; at most
        # MAX_DEPTH + 1 descriptors are open at once.
        stack = [(root_fd, "", None)]
        directories = 1
        entries = 0
        try:
            while stack:
                fd, prefix, pending = stack[-1]
                if pending is None:
                    files, subdirectories, seen = self._listing(fd, MAX_ENTRIES - entries)
                    entries += seen
                    stack[-1] = (fd, prefix, subdirectories)
                    for name, info in files:
                        yield prefix + name, fd, name, info
                    continue
                if not pending:
                    os.close(fd)
                    stack.pop()
                    continue
                name = pending.pop(0)
                if len(stack) > MAX_DEPTH or directories >= MAX_DIRECTORIES:
                    self.skipped += 1
                    continue
                try:
                    child = os.open(name, OPEN_DIRECTORY, dir_fd=fd)
                except OSError:
                    self.skipped += 1
                    continue
                directories += 1
                stack.append((child, prefix + name + "/", None))
        finally:
            for fd, _, _ in stack:
                os.close(fd)

    def _listing(self, fd, budget):
        """(files, subdirectories, entries seen) of the directory `fd`, each sorted by name."""
        files, subdirectories, seen = [], [], 0
        try:
            with os.scandir(fd) as entries:
                for entry in entries:
                    if seen >= budget:
                        self.skipped += 1
                        break
                    seen += 1
                    try:
                        info = entry.stat(follow_symlinks=False)
                    except OSError:
                        self.skipped += 1
                        continue
                    if stat.S_ISREG(info.st_mode):
                        files.append((entry.name, info))
                    elif stat.S_ISDIR(info.st_mode):
                        subdirectories.append(entry.name)
        except OSError:
            self.skipped += 1
        files.sort(key=lambda item: item[0])
        subdirectories.sort()
        return files, subdirectories, seen


def clean(text):
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def state(out_dir):
    """What is under out_dir now, to tell later which files a run wrote or changed:
    {path: (inode, mtime_ns, size)} of its regular files."""
    return {path: (info.st_ino, info.st_mtime_ns, info.st_size)
            for path, _, _, info in Walk(out_dir)}


def read_regular(name, dir_fd, cap):
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                     dir_fd=dir_fd)
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                return None
            content = f.read(cap + 1)
    except OSError:
        return None
    return content if len(content) <= cap else None


def collect(out_dir, caps, unchanged=None):
    """([(path, bytes)], omitted): the regular files under out_dir within `caps` (the control
    file's max_files, max_file_bytes, max_total_bytes). With `unchanged` (a session's run:
    state() before it), only those it wrote or changed."""
    files = []
    omitted = 0
    total = 0
    walk = Walk(out_dir)
    for path, dir_fd, name, info in walk:
        if unchanged is not None and unchanged.get(path) == (info.st_ino, info.st_mtime_ns,
                                                             info.st_size):
            continue
        size = info.st_size
        if (len(files) >= caps["max_files"] or size > caps["max_file_bytes"]
                or total + size > caps["max_total_bytes"]):
            omitted += 1
            continue
        content = read_regular(name, dir_fd, caps["max_file_bytes"])
        if content is None or total + len(content) > caps["max_total_bytes"]:
            omitted += 1
            continue
        total += len(content)
        files.append((clean(path), content))
    return files, omitted + walk.skipped
