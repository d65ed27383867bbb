"""The grammar of the frames the server writes to a sandbox's stdin, whose names protocol.py
holds; core/include/scs/backend/launcher_frames.h is the server's side of this codec, and
tests/golden/stdin_frames.json holds streams both sides' tests must decode alike.

  run        RUN_FRAME SP size LF, then `size` bytes of bundle (size <= MAX_FRAME_BYTES)
  interrupt  INTERRUPT_FRAME LF
  session    SESSION_FRAME SP seconds LF (whole seconds above 0, at most
             MAX_SESSION_SECONDS_DIGITS digits): the first bytes of a prepared sandbox's stdin
             when it becomes a session's, instead of a bundle
  egress     EGRESS_STDIN_FRAME SP type SP stream SP value LF, then `value` bytes of payload when
             type is EGRESS_DATA (0 < value <= MAX_EGRESS_STDIN_PAYLOAD_BYTES); type is one of
             EGRESS_STDIN_TYPES, stream fits 32 bits
Numbers are 1 to 19 decimal digits (MAX_NUMBER_DIGITS), and nothing else. A header is at most
MAX_FRAME_HEADER_BYTES before its LF."""

import collections

from . import protocol

RUN, INTERRUPT, SESSION, EGRESS = "run", "interrupt", "session", "egress"
MAX_NUMBER_DIGITS = 19

# kind: one of the four; payload: the bundle (run) or the data (egress data), else b"";
# seconds: a session's deadline; egress_type (bytes of one letter), stream and value: egress.
Frame = collections.namedtuple("Frame", "kind payload seconds egress_type stream value",
                               defaults=(b"", 0, b"", 0, 0))

_RUN = protocol.RUN_FRAME.encode("ascii") + b" "
_SESSION = protocol.SESSION_FRAME.encode("ascii") + b" "
_EGRESS = protocol.EGRESS_STDIN_FRAME.encode("ascii") + b" "
_INTERRUPT = protocol.INTERRUPT_FRAME.encode("ascii")
_EGRESS_TYPES = protocol.EGRESS_STDIN_TYPES.encode("ascii")
_DATA = protocol.EGRESS_DATA.encode("ascii")


def run_frame(bundle):
    return _RUN + str(len(bundle)).encode("ascii") + b"\n" + bundle


def interrupt_frame():
    return _INTERRUPT + b"\n"


def session_frame(seconds):
    return _SESSION + str(seconds).encode("ascii") + b"\n"


def egress_frame(egress_type, stream, value=0, payload=b""):
    """`value` is the payload's size for EGRESS_DATA (the argument is then ignored)."""
    data = egress_type == _DATA
    head = b" ".join([_EGRESS[:-1], egress_type, str(stream).encode("ascii"),
                      str(len(payload) if data else value).encode("ascii")])
    return head + b"\n" + (payload if data else b"")


def _number(text, max_digits, maximum):
    """The decimal number `text` (bytes) when it is 1 to `max_digits` digits and at most
    `maximum`, else None."""
    if not text or len(text) > max_digits or not all(48 <= c <= 57 for c in text):
        return None
    value = int(text)
    return value if value <= maximum else None


def parse_header(header):
    """(Frame without its payload, the payload's size) of a frame's header line (bytes, without
    its LF), or None for a line that is no frame's header."""
    if header == _INTERRUPT:
        return Frame(INTERRUPT), 0
    if header.startswith(_RUN):
        size = _number(header[len(_RUN):], MAX_NUMBER_DIGITS, protocol.MAX_FRAME_BYTES)
        return None if size is None else (Frame(RUN), size)
    if header.startswith(_SESSION):
        seconds = _number(header[len(_SESSION):], protocol.MAX_SESSION_SECONDS_DIGITS,
                          (1 << 64) - 1)
        return None if not seconds else (Frame(SESSION, seconds=seconds), 0)
    if not header.startswith(_EGRESS):
        return None
    parts = header[len(_EGRESS):].split(b" ")
    if len(parts) != 3 or len(parts[0]) != 1 or parts[0] not in _EGRESS_TYPES:
        return None
    stream = _number(parts[1], 10, (1 << 32) - 1)
    value = _number(parts[2], MAX_NUMBER_DIGITS, (1 << 64) - 1)
    if stream is None or value is None:
        return None
    size = 0
    if parts[0] == _DATA:
        if not 0 < value <= protocol.MAX_EGRESS_STDIN_PAYLOAD_BYTES:
            return None
        size = value
    return Frame(EGRESS, egress_type=parts[0], stream=stream, value=value), size


class Reader:
    """Takes a stdin's bytes as they arrive and gives its whole frames, in order. Bytes that
    are no frame, or a frame of a kind not in `kinds` (refused at its header, before its payload
    is waited for), raise ValueError (only the server writes a sandbox's stdin), and so does every
    later feed(); the frames of that call are not given. `skip_nul`: NUL bytes between frames are
    skipped (a one-shot run's stdin after its bundle, whose last padding block the bundle's reader
    may have left)."""

    def __init__(self, skip_nul=False, kinds=(RUN, INTERRUPT, SESSION, EGRESS)):
        self.skip_nul = skip_nul
        self.kinds = frozenset(kinds)
        self.buffer = bytearray()
        self.pending = None  # (the frame whose header was read, its payload's size)
        self.error = None

    def feed(self, data):
        if self.error is not None:
            raise ValueError(self.error)
        self.buffer += data
        frames = []
        while True:
            if self.pending is None:
                if self.skip_nul:
                    start = len(self.buffer) - len(self.buffer.lstrip(b"\0"))
                    del self.buffer[:start]
                end = self.buffer.find(b"\n")
                if end < 0:
                    if len(self.buffer) > protocol.MAX_FRAME_HEADER_BYTES:
                        self.error = "a frame header is too long"
                        raise ValueError(self.error)
                    return frames
                header = bytes(self.buffer[:end])
                parsed = parse_header(header) if end <= protocol.MAX_FRAME_HEADER_BYTES else None
                if parsed is None:
                    self.error = f"unknown frame {header[:32]!r}"
                    raise ValueError(self.error)
                if parsed[0].kind not in self.kinds:
                    self.error = f"a frame of a kind not taken here: {header[:32]!r}"
                    raise ValueError(self.error)
                del self.buffer[:end + 1]
                self.pending = parsed
            frame, size = self.pending
            if len(self.buffer) < size:
                return frames
            frames.append(frame._replace(payload=bytes(self.buffer[:size])))
            del self.buffer[:size]
            self.pending = None
