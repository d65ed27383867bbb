"""The inner channel: what PID 1 (session.py) and a session's interpreter say to each other, and
the one place its grammar is written. Python's interpreter (child/session.py) speaks it through
this module; the others take its words from here as languages.py starts them: child/session.bash
names them as @NAME@ placeholders, which languages.session_argv fills in with this module's
NAME, and child/runner.js gets MORE, LAST and PIECE_BYTES as its arguments.
tests/launcher/test_channel.py runs each interpreter against this codec, with other words where
the interpreter takes them from here, so a side that writes a word of its own fails there.

PID 1 to the interpreter, one command per run:
  python      one SOCK_SEQPACKET message, command(): {"run": N, "result_cap": BYTES} and, with
              egress, "environment": the proxy variables; the read end of a pipe holding the
              run's stdin rides along (SCM_RIGHTS)
  bash, js    one line on COMMAND_FD, command_line(): N SP BYTES LF, or for a bash run with a
              stdin N SP BYTES SP PATH LF (PATH: the file PID 1 wrote it to, without spaces)
The interpreter to PID 1, on the channel (ANSWER_FD for bash and js: the socket's other end):
  {"started": N} once the run's code may be interrupted, then {"run": N, "exit": {"code": C},
  "exception": record or null, "result": text or null} (bash's has "exit" alone), each as JSON
  sent in records (pieces()): the marker MORE or LAST, then at most PIECE_BYTES of the JSON;
  LAST ends an answer. One write is one record, on which the kernel puts the writer's
  credentials; PID 1 joins them (Answers). bash's answers are always one LAST record.

The markers are one printable ASCII byte each, none that a single-quoted printf format in
session.bash must escape (' % \\).

Python's interpreter imports this module before any of the code runs and keeps it after taking
the package out of sys.modules (child/program.py): what the interpreter calls here holds the
builtins it needs from load time, as child/record.py does."""

import json

MORE = b"+"
LAST = b"."
PIECE_BYTES = 32 << 10

# bash's and JavaScript's interpreters: their commands in, their answers out.
COMMAND_FD = 3
ANSWER_FD = 4

# The keys of the commands and answers.
RUN = "run"
RESULT_CAP = "result_cap"
ENVIRONMENT = "environment"
STARTED = "started"
EXIT = "exit"
CODE = "code"
EXCEPTION = "exception"
RESULT = "result"

_len = len
_range = range
_dumps = json.dumps
_loads = json.loads


def command(seq, result_cap, environment=None):
    """Python's command for run `seq`, as PID 1 sends it."""
    message = {RUN: seq, RESULT_CAP: result_cap}
    if environment:
        message[ENVIRONMENT] = environment
    return json.dumps(message).encode("ascii")


def read_command(data):
    """(seq, result_cap, environment or None) of Python's command. Raises what json.loads and a
    missing key raise: only PID 1 sends commands."""
    message = _loads(data)
    return message[RUN], message[RESULT_CAP], message.get(ENVIRONMENT)


def command_line(seq, result_cap, stdin_path=None):
    """bash's and JavaScript's command for run `seq`."""
    line = f"{seq} {result_cap}"
    if stdin_path is not None:
        line += f" {stdin_path}"
    return f"{line}\n".encode("ascii")


def started(seq):
    return {STARTED: seq}


def answer(seq, code, exception=None, result=None):
    return {RUN: seq, EXIT: {CODE: code}, EXCEPTION: exception, RESULT: result}


def pieces(message):
    """`message` (an answer) as JSON in the records that carry it, in order."""
    data = _dumps(message).encode("ascii")
    size = _len(data)
    return [(LAST if at + PIECE_BYTES >= size else MORE) + data[at:at + PIECE_BYTES]
            for at in _range(0, size or 1, PIECE_BYTES)]


class Answers:
    """PID 1's side: joins the records of the interpreter's answers. An answer larger than
    `max_bytes`, or one with a record the kernel cut (MSG_TRUNC), is broken: it still ends at
    its LAST record, as None. A record whose marker is not LAST continues the answer."""

    def __init__(self, max_bytes):
        self.max_bytes = max_bytes
        self.data = bytearray()
        self.broken = False

    def feed(self, record, truncated=False):
        """Takes one record (not empty). (True, the answer's bytes or None when broken) when it
        ended an answer, else (False, None)."""
        self.broken |= truncated
        self.data += record[1:]
        if len(self.data) > self.max_bytes:
            self.broken = True
            self.data.clear()
        if record[:1] != LAST:
            return False, None
        data = None if self.broken else bytes(self.data)
        self.data.clear()
        self.broken = False
        return True, data

