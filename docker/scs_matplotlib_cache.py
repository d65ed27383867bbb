"""Seed matplotlib's font cache into MPLCONFIGDIR from the copy built into the image.

Imported at every interpreter start by scs-matplotlib-cache.pth (site runs .pth imports under
`python3 -I` too). The sandbox's root is read-only and MPLCONFIGDIR (/tmp/matplotlib) lies on a
tmpfs that starts empty, and matplotlib keeps its font list only in a writable MPLCONFIGDIR: left
alone it would rescan every font on every run. The first interpreter of a run (the launcher or
the program's, which start together) copies the prebuilt list; a later one finds it there and
does nothing.
"""

import os

SOURCE = "/opt/scs/matplotlib"


def seed():
    target = os.environ.get("MPLCONFIGDIR")
    if not target:
        return
    try:
        names = [name for name in os.listdir(SOURCE) if name.startswith("fontlist-")]
        missing = [name for name in names if not os.path.exists(os.path.join(target, name))]
        if not missing:
            return
        os.makedirs(target, 0o700, exist_ok=True)
        for name in missing:
            with open(os.path.join(SOURCE, name), "rb") as source:
                data = source.read()
            # Written whole under a private name, then renamed: a concurrent interpreter sees
            # either no file or the complete one.
            partial = os.path.join(target, f".{name}.{os.getpid()}")
            fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            os.replace(partial, os.path.join(target, name))
    except OSError:
        # No writable MPLCONFIGDIR (a read-only /tmp, say): matplotlib then builds the font list
        # itself, slower but correct. Never let this break an interpreter start.
        return


seed()
