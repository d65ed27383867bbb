"""The sandbox launcher: PID 1 of every sandbox, and the bootstraps of the program's interpreter.

PID 1 (pid1.py) runs as the sandbox's uid under `python3 -I /opt/scs/launcher.py`, before any
user code, and reads its run's bundle from stdin: an uncompressed ustar built by the server,
checked again here (bundle.py). It runs the program as its child (oneshot.py, or session.py for
a session's sandbox), ends every process, and writes the report (report.py) in the launcher
protocol (protocol.py, mirrored by core/include/scs/backend/launcher_protocol.h).

The modules under child/ run inside the program's interpreter, before and around the user's
code; nothing else here does. This file imports nothing: the program's interpreter imports it.
"""
