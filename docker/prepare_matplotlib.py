"""Build-time step of the image (run as root by the Dockerfile): make matplotlib headless and fast.

1. The active matplotlibrc gets `backend: Agg` (Debian's /etc/matplotlibrc says TkAgg), so a
   plot works without MPLBACKEND too.
2. The font list is built once into /opt/scs/matplotlib, and scs_matplotlib_cache.py is
   installed next to matplotlib with a .pth file that imports it at interpreter start, so every
   run starts from that list instead of rescanning the fonts (see that module).
3. Both are checked in a fresh interpreter; any failure fails the image build.
Does nothing when the image has no matplotlib (the minimal flavour).
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

CACHE = "/opt/scs/matplotlib"
SEED_MODULE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scs_matplotlib_cache.py")
PTH_NAME = "scs-matplotlib-cache.pth"


def python(code, env):
    return subprocess.run(
        [sys.executable, "-I", "-c", code], env=env, cwd="/", check=True, text=True,
        stdout=subprocess.PIPE,
    ).stdout.strip()


def clean_env(config_dir):
    return {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": config_dir,
            "MPLCONFIGDIR": config_dir}


def set_agg_backend(env):
    rc = python("import matplotlib; print(matplotlib.matplotlib_fname())", env)
    with open(rc) as f:
        text = f.read()
    text, count = re.subn(r"(?m)^#*\s*backend\s*:.*$", "backend: Agg", text, count=1)
    if count != 1:
        text += "\nbackend: Agg\n"
    with open(rc, "w") as f:
        f.write(text)
    backend = python("import matplotlib; print(matplotlib.rcParams['backend'])", env)
    if backend.lower() != "agg":
        sys.exit(f"prepare_matplotlib: {rc} still selects backend {backend!r}")
    print(f"prepare_matplotlib: {rc}: backend Agg")


def build_font_cache(env):
    shutil.rmtree(CACHE, ignore_errors=True)
    os.makedirs(CACHE, 0o755)
    python("import matplotlib.font_manager", dict(env, MPLCONFIGDIR=CACHE))
    kept = [name for name in os.listdir(CACHE) if name.startswith("fontlist-")]
    if len(kept) != 1:
        sys.exit(f"prepare_matplotlib: expected one fontlist-*.json in {CACHE}, got {kept}")
    for name in os.listdir(CACHE):
        if name not in kept:
            path = os.path.join(CACHE, name)
            shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
    os.chmod(os.path.join(CACHE, kept[0]), 0o644)
    print(f"prepare_matplotlib: font list {CACHE}/{kept[0]}")
    return kept[0]


def install_seed(env):
    site_dir = python(
        "import matplotlib, os; print(os.path.dirname(os.path.dirname(matplotlib.__file__)))", env
    )
    shutil.copyfile(SEED_MODULE, os.path.join(site_dir, "scs_matplotlib_cache.py"))
    with open(os.path.join(site_dir, PTH_NAME), "w") as f:
        f.write("import scs_matplotlib_cache\n")
    for name in ("scs_matplotlib_cache.py", PTH_NAME):
        os.chmod(os.path.join(site_dir, name), 0o644)
    python("import compileall, sys; sys.exit(not compileall.compile_file("
           f"{os.path.join(site_dir, 'scs_matplotlib_cache.py')!r}, quiet=1))", env)
    print(f"prepare_matplotlib: seed installed in {site_dir}")


def check_seeded_cache_is_used(font_list):
    """A fresh, empty MPLCONFIGDIR must get the prebuilt list and matplotlib must keep it."""
    with open(os.path.join(CACHE, font_list), "rb") as f:
        expected = f.read()
    with tempfile.TemporaryDirectory() as tmp:
        config_dir = os.path.join(tmp, "matplotlib")
        python("import matplotlib.pyplot as plt; plt.plot([1, 2]); plt.savefig("
               f"{os.path.join(tmp, 'check.png')!r})", clean_env(config_dir))
        with open(os.path.join(config_dir, font_list), "rb") as f:
            if f.read() != expected:
                sys.exit("prepare_matplotlib: matplotlib rebuilt the seeded font list")
        if not os.path.getsize(os.path.join(tmp, "check.png")):
            sys.exit("prepare_matplotlib: the check plot is empty")
    print("prepare_matplotlib: a fresh MPLCONFIGDIR starts from the prebuilt font list")


def main():
    probe = subprocess.run([sys.executable, "-I", "-c", "import matplotlib"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if probe.returncode != 0:
        print("prepare_matplotlib: no matplotlib in this image; nothing to do")
        return
    with tempfile.TemporaryDirectory() as tmp:
        env = clean_env(tmp)
        set_agg_backend(env)
        font_list = build_font_cache(env)
        install_seed(env)
    check_seeded_cache_is_used(font_list)


if __name__ == "__main__":
    main()
