"""The launcher protocol: what the server and PID 1 say to each other over the sandbox's stdin,
stdout and stderr. core/include/scs/backend/launcher_protocol.h is the other side's copy, and
tests/unit/launcher_protocol_test.cc fails when the two disagree: keep every constant here a
plain literal assignment, one per line.

In: the bundle, an uncompressed ustar with the code (main.py, main.sh or main.js: CODE_FILE_*),
the run's files and, under CONTROL_DIRECTORY, the control file (JSON: the run's nonce and
language, the caps on returned files, its watchdog and result cap) and the run's stdin, which
PID 1 keeps in memory and never writes to disk. A session's sandbox reads frames instead
(frames.py has their grammar and codec):
RUN_FRAME, a space, the bundle's size in decimal and "\\n", then the bundle; or INTERRUPT_FRAME
and "\\n". A sandbox prepared for a run becomes a session's when its stdin begins with
SESSION_FRAME, a space, the session's deadline in seconds and "\\n" instead of a bundle (whose
first member is always the code file): its warm interpreter, which has run no code, is ended
and the session's is started.
Out: once every process of the run has ended (in a session: once its code has), PID 1 writes to
stderr END_PREFIX, the nonce and MARKER_END, and then to stdout TRAILER_PREFIX, the nonce,
MARKER_END, one line of JSON (the TRAILER_* keys) and "\\n".
"""

REJECTED_EXIT = 125

CONTROL_DIRECTORY = ".scs"
CONTROL_FILE = "control.json"
STDIN_FILE = "stdin"

CONTROL_NONCE = "nonce"
CONTROL_OUT_DIR = "out_dir"
CONTROL_MAX_FILES = "max_files"
CONTROL_MAX_FILE_BYTES = "max_file_bytes"
CONTROL_MAX_TOTAL_BYTES = "max_total_bytes"
CONTROL_STDIN = "stdin"
CONTROL_WATCHDOG = "watchdog_seconds"
CONTROL_RESULT_CAP = "result_cap"
CONTROL_LANGUAGE = "language"
# The sandbox's egress nonce (issue 44), present only when its tenant may reach hosts through the
# server: PID 1 then serves its relay (relay.py) and gives programs the proxy variables.
CONTROL_EGRESS = "egress"
# Brokered credentials (issue 48): the server's brokering CA (PEM), which PID 1 adds to the
# programs' trust (SSL_CERT_FILE and the like), and the placeholders programs are given
# ({"GITHUB_TOKEN": "scs-placeholder-..."}). Present only with CONTROL_EGRESS.
CONTROL_EGRESS_CA = "egress_ca"
CONTROL_EGRESS_ENVIRONMENT = "egress_environment"

# The languages CONTROL_LANGUAGE names (languages.py; python when the control file names none),
# and the file in /workspace that holds each one's code.
LANGUAGE_PYTHON = "python"
LANGUAGE_BASH = "bash"
LANGUAGE_JAVASCRIPT = "javascript"
CODE_FILE_PYTHON = "main.py"
CODE_FILE_BASH = "main.sh"
CODE_FILE_JAVASCRIPT = "main.js"

RUN_FRAME = "SCS-RUN"
INTERRUPT_FRAME = "SCS-INTERRUPT"
SESSION_FRAME = "SCS-SESSION"
MAX_FRAME_HEADER_BYTES = 64
MAX_FRAME_BYTES = 2147483648
MAX_SESSION_SECONDS_DIGITS = 12

EGRESS_MARKER_PREFIX = "\0SCS-NET-"
EGRESS_STDIN_FRAME = "SCS-NET"
# The types of egress frame the server writes to stdin (relay.py names them): the one among them
# that carries data, at most MAX_EGRESS_STDIN_PAYLOAD_BYTES a frame, and the two that end a
# stream (no more data this way; gone both ways).
EGRESS_STDIN_TYPES = "DCFR"
EGRESS_DATA = "D"
EGRESS_FIN = "F"
EGRESS_RESET = "R"
MAX_EGRESS_STDIN_PAYLOAD_BYTES = 65536

TRAILER_PREFIX = "\n\0SCS-TRAILER-"
END_PREFIX = "\0SCS-END-"
MARKER_END = "\0"

TRAILER_EXIT = "exit"
TRAILER_EXCEPTION = "exception"
TRAILER_FILES = "files"
TRAILER_FILES_TRUNCATED = "files_truncated"
TRAILER_FILES_OMITTED = "files_omitted"
TRAILER_RESULT = "result"
TRAILER_SESSION_OVER = "session_over"
TRAILER_REFUSED = "refused"
TRAILER_LAUNCHER_ERROR = "launcher_error"
# A one-shot run's interpreter's warm imports: their seconds when they all finished before the
# run arrived, else null. How the server's pool learns how long a sandbox takes to be ready.
TRAILER_WARM_SECONDS = "warm_seconds"

FLAG_DEADLINE = "--deadline"
FLAG_WARM = "--warm"
FLAG_RLIMITS = "--rlimits"
FLAG_MASKED = "--masked"
FLAG_READONLY = "--readonly"
FLAG_CONFINE = "--confine"
FLAG_NO_NETWORK = "--no-network"
FLAG_SESSION = "--session"

# Where an image derived for a run's packages holds them: on no interpreter's default path, so
# that PID 1 imports and runs nothing of a package; the program's interpreter adds it
# (child/program.py), a bash or JavaScript program's Python finds it through PYTHONPATH.
PACKAGES_DIRECTORY = "/usr/local/lib/scs-packages"
