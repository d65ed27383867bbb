"""What PID 1 tells the server about a run: the end marker on stderr, then the trailer on stdout
(protocol.py). Everything PID 1 reads from the program's side (an exception record, a session
interpreter's answer) is parsed here as untrusted: any failure to parse is no record."""

import base64
import fcntl
import json
import os
import re

from . import protocol

MAX_TEXT_BYTES = 8 << 10
LONE_SURROGATE = re.compile("[\ud800-\udfff]")
RECORD_KEYS = ("type", "message", "traceback")


def clean(text):
    """`text` as valid UTF-8: bytes Python escaped (surrogateescape) and lone surrogates, which
    JSON from JavaScript can carry ("\\ud83d"), become U+FFFD."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    except UnicodeEncodeError:  # a surrogate surrogateescape did not make
        return LONE_SURROGATE.sub("\ufffd", text)


def exit_record(status):
    """How a process ended, from its wait status: {"code": N} or {"signal": N}."""
    if os.WIFSIGNALED(status):
        return {"signal": os.WTERMSIG(status)}
    return {"code": os.waitstatus_to_exitcode(status)}


def exit_like(exit):
    """PID 1 cannot die by a signal it sends itself: death by signal N is exit code 128 + N."""
    os._exit(exit["code"] if "code" in exit else 128 + exit["signal"])


def parse_json(data):
    """The JSON value of `data`, or None: a record the program wrote may be anything, nested as
    deep as it likes."""
    try:
        return json.loads(data)
    except (ValueError, RecursionError, MemoryError):
        return None


def exception_record(value):
    """{type, message, traceback} with each text valid and capped; None for anything else."""
    if not isinstance(value, dict) or not all(isinstance(value.get(k), str) for k in RECORD_KEYS):
        return None
    return {k: clean(value[k])[:MAX_TEXT_BYTES] for k in RECORD_KEYS}


def last_exception_record(chunks):
    """The last complete record on the one-shot interpreter's report pipe. It comes from inside
    the program's own process, so the program can write one too: the caller keeps it only for a
    run that failed the way an uncaught exception fails."""
    lines = b"".join(chunks).split(b"\n")
    return exception_record(parse_json(lines[-2])) if len(lines) >= 2 else None


def bounded_result(value, cap):
    """A result the program's interpreter wrote (`value`, which it cut to `cap` bytes), as valid
    UTF-8 within a marker's bytes of `cap`; None for anything but a string."""
    if not isinstance(value, str):
        return None
    return clean(value).encode("utf-8")[:cap + 64].decode("utf-8", "ignore")


def last_result(chunks, cap):
    """The last {"result": text} on a JavaScript run's report pipe (child/runner.js writes it
    when the code's last value is there), as bounded_result(); None when there is none."""
    for line in reversed(b"".join(chunks).split(b"\n")[1:-1]):
        value = parse_json(line)
        if isinstance(value, dict) and "result" in value:
            return bounded_result(value["result"], cap)
    return None


def warm_seconds(chunks):
    """The warm imports' seconds from the first line on the report pipe, which the interpreter
    writes before any of the program's code runs; None when it says none."""
    first = b"".join(chunks).split(b"\n", 1)
    value = parse_json(first[0]) if len(first) == 2 else None
    seconds = value.get("warm_seconds") if isinstance(value, dict) else None
    return seconds if type(seconds) is float and 0 <= seconds < 3600 else None


def write_all(data, fd=1):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def blocking(fd):
    """The program may share the descriptor's open file description and have made it
    non-blocking."""
    flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~os.O_NONBLOCK)


def write_trailer(nonce, exit, exception=None, files=(), omitted=0, extra=None):
    """The end marker on stderr, then the trailer on stdout (stderr first: the engine carries the
    two streams apart, and the server takes the trailer as the end of everything only once
    stderr's end marker has arrived too). `extra`: the trailer's other keys (TRAILER_RESULT,
    TRAILER_SESSION_OVER, TRAILER_REFUSED, TRAILER_LAUNCHER_ERROR, TRAILER_WARM_SECONDS), each
    left out when None or False."""
    for fd in (1, 2):
        blocking(fd)
    write_all((protocol.END_PREFIX + nonce + protocol.MARKER_END).encode("ascii"), fd=2)
    write_all((protocol.TRAILER_PREFIX + nonce + protocol.MARKER_END).encode("ascii"))
    write_all(b'{"' + protocol.TRAILER_EXIT.encode() + b'":' + json.dumps(exit).encode("ascii")
              + b',"' + protocol.TRAILER_EXCEPTION.encode() + b'":'
              + json.dumps(exception).encode("ascii")
              + b',"' + protocol.TRAILER_FILES.encode() + b'":[')
    for index, (path, content) in enumerate(files):
        head = json.dumps({"path": path, "size": len(content)})[:-1]
        write_all((b"," if index else b"") + head.encode("ascii") + b',"content_base64":"'
                  + base64.b64encode(content) + b'"}')
    tail = {protocol.TRAILER_FILES_TRUNCATED: omitted > 0, protocol.TRAILER_FILES_OMITTED: omitted}
    for key, value in (extra or {}).items():
        if value is not None and value is not False:
            tail[key] = value
    write_all(b"]," + json.dumps(tail)[1:].encode("ascii") + b"\n")

