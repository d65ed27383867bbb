"""PID 1 of every sandbox: `/usr/bin/python3 -I /opt/scs/launcher.py FLAGS` (scs_launcher/)."""

import os
import sys

ROOT = os.path.dirname(os.path.abspath(__file__))

if __name__ == "__main__":
    sys.path.insert(0, ROOT)
    from scs_launcher import pid1

    pid1.main(sys.argv[1:], ROOT)
