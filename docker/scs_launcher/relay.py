"""PID 1's egress relay (issue 44): when the run's control file names an egress nonce, PID 1
listens on the sandbox's own loopback (RELAY_ADDRESS) and carries each connection a program
makes there to the server as a stream of frames, over the stdout and stdin the server already
holds. It reads nothing of what it carries and decides nothing: the server reads the proxy
request, applies the operator's policy, dials and relays. The sandbox still has no network
interface, so a program that ignores the proxy variables gets ENETUNREACH at once.

Out, on stdout: STDOUT_MARKER, the nonce and MARKER_END, then a type byte, the stream id and a
value (4 bytes each, big-endian) and, for data, the payload; each frame one write() of at most
MAX_STDOUT_FRAME bytes, which a pipe keeps whole, so that a one-shot program sharing stdout can
write between frames but never into one. In, on stdin: the egress frames of frames.py. Each side
sends data only within the credit the other gave (INITIAL_WINDOW, then what each credit frame
adds). core/src/egress/frames.h is the server's side."""

import errno
import os
import select
import socket
import struct

from . import frames, processes, protocol

STDOUT_MARKER = protocol.EGRESS_MARKER_PREFIX.encode("ascii")
HEADER = struct.Struct(">cII")
MAX_STDOUT_FRAME = 4096
INITIAL_WINDOW = 256 << 10
CREDIT_BATCH = 32 << 10
RELAY_ADDRESS = ("127.0.0.1", 3128)
MAX_STREAMS = 256  # the server caps what it carries far lower; this bounds PID 1's own table

OPEN, CREDIT = b"O", b"C"
DATA, FIN, RESET = (protocol.EGRESS_DATA.encode("ascii"), protocol.EGRESS_FIN.encode("ascii"),
                    protocol.EGRESS_RESET.encode("ascii"))


def proxy_environment(control=None):
    """What every program of a run with egress is given: the relay as its proxy, for each
    language's usual clients (curl reads http_proxy in lower case only; Node.js reads them with
    NODE_USE_ENV_PROXY). With brokered credentials (issue 48), the placeholders, and a CA bundle
    of the system's CAs and the server's brokering CA for each language's TLS clients."""
    http = "http://%s:%d" % RELAY_ADDRESS
    socks = "socks5h://%s:%d" % RELAY_ADDRESS
    environment = {}
    for name, value in (("HTTP_PROXY", http), ("HTTPS_PROXY", http), ("ALL_PROXY", socks),
                        ("NO_PROXY", "localhost,127.0.0.1,::1")):
        environment[name] = value
        environment[name.lower()] = value
    environment["NODE_USE_ENV_PROXY"] = "1"
    # Node 22 calls its proxy agent experimental on every program's stderr.
    environment["NODE_OPTIONS"] = "--disable-warning=UNDICI-EHPA"
    control = control or {}
    environment.update(control.get(protocol.CONTROL_EGRESS_ENVIRONMENT) or {})
    ca = control.get(protocol.CONTROL_EGRESS_CA)
    if ca:
        bundle = write_ca_bundle(ca)
        for name in ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
                     "NODE_EXTRA_CA_CERTS"):
            environment[name] = bundle
    return environment


SYSTEM_CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
CA_BUNDLE_DIRECTORY = "/tmp/.scs-egress"


def write_ca_bundle(ca):
    """The system's CAs and the server's brokering CA in one file the programs may read (a
    program that changes it only loses its own HTTPS). Hosts without a credential are still
    verified against the system's CAs alone by the host's own certificate chain."""
    try:
        with open(SYSTEM_CA_BUNDLE, "rb") as system:
            certificates = system.read()
    except OSError:
        certificates = b""
    os.makedirs(CA_BUNDLE_DIRECTORY, mode=0o755, exist_ok=True)
    path = os.path.join(CA_BUNDLE_DIRECTORY, "ca-bundle.pem")
    with open(path + ".new", "wb") as bundle:
        bundle.write(certificates.rstrip(b"\n") + b"\n" + ca.encode("ascii"))
    os.chmod(path + ".new", 0o644)
    os.replace(path + ".new", path)
    return path


class Stream:
    def __init__(self, number, connection):
        self.number = number
        self.connection = connection
        self.credit = INITIAL_WINDOW  # bytes PID 1 may still send the server
        self.outbound = bytearray()   # from the server, for the program
        self.written = 0              # written to the program since the last credit frame
        self.read_ended = False       # the program shut its side (FIN sent)
        self.server_ended = False     # the server sent FIN
        self.shut = False             # the program's connection was shut for writing


class Relay:
    """The listener and its streams, served by PID 1's loop (processes.Loop)."""

    def __init__(self, loop, nonce):
        self.loop = loop
        self.marker = STDOUT_MARKER + nonce.encode("ascii") + b"\0"
        self.max_payload = MAX_STDOUT_FRAME - len(self.marker) - HEADER.size
        self.streams = {}
        self.next_number = 1
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(RELAY_ADDRESS)
        self.listener.listen(64)
        self.listener.setblocking(False)
        loop.add(self.listener.fileno(), processes.READABLE, self.on_accept)
        self.writable = select.poll()
        self.writable.register(1, select.POLLOUT)

    # To the server.

    def write_frame(self, kind, number, value=0, payload=b""):
        """One frame, in one write(): a pipe keeps a write of at most PIPE_BUF bytes whole, and
        a program that made stdout non-blocking gets PID 1 to wait for room, not to split."""
        frame = memoryview(self.marker + HEADER.pack(kind, number, value) + payload)
        while frame:
            try:
                frame = frame[os.write(1, frame):]
            except BlockingIOError:
                self.writable.poll(1000)
            except OSError:
                return  # the server is gone: the deadline ends the sandbox

    # From the program.

    def on_accept(self, _):
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:  # none waiting (EAGAIN), or none to be had
                return
            if len(self.streams) >= MAX_STREAMS:
                connection.close()
                continue
            connection.setblocking(False)
            # A relay writes what arrives as it arrives: with Nagle's algorithm a second small
            # write waits for the program's delayed ACK of the first, 40 ms (a TLS session
            # ticket, then the answer).
            connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            stream = Stream(self.next_number, connection)
            self.next_number += 2
            self.streams[stream.number] = stream
            self.write_frame(OPEN, stream.number)
            self.update(stream)

    def update(self, stream):
        """Polls the program's connection for what the stream can do now."""
        events = 0
        if not stream.read_ended and stream.credit > 0:
            events |= processes.READABLE
        if stream.outbound:
            events |= processes.WRITABLE
        fd = stream.connection.fileno()
        if events:
            self.loop.add(fd, events, lambda revents, s=stream: self.on_connection(s, revents))
        else:
            self.loop.remove(fd)

    def on_connection(self, stream, revents):
        if revents & select.POLLIN or (revents & (select.POLLHUP | select.POLLERR)
                                       and not stream.read_ended and stream.credit > 0):
            try:
                data = stream.connection.recv(min(stream.credit, 4 * self.max_payload))
            except (BlockingIOError, InterruptedError):
                data = None
            except OSError:
                self.reset(stream, tell=True)
                return
            if data == b"":
                stream.read_ended = True
                self.write_frame(FIN, stream.number)
            elif data:
                stream.credit -= len(data)
                for start in range(0, len(data), self.max_payload):
                    piece = data[start:start + self.max_payload]
                    self.write_frame(DATA, stream.number, len(piece), piece)
        if revents & select.POLLOUT and stream.outbound:
            try:
                sent = stream.connection.send(stream.outbound)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError:
                self.reset(stream, tell=True)
                return
            del stream.outbound[:sent]
            stream.written += sent
            if stream.written >= CREDIT_BATCH or not stream.outbound:
                self.write_frame(CREDIT, stream.number, stream.written)
                stream.written = 0
        self.settle(stream)

    def settle(self, stream):
        if stream.server_ended and not stream.outbound and not stream.shut:
            stream.shut = True
            try:
                stream.connection.shutdown(socket.SHUT_WR)
            except OSError:
                pass
        if stream.read_ended and stream.shut:
            self.forget(stream)
        else:
            self.update(stream)

    def forget(self, stream, hard=False):
        self.loop.remove(stream.connection.fileno())
        if hard:
            stream.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                         struct.pack("ii", 1, 0))
        stream.connection.close()
        self.streams.pop(stream.number, None)

    def reset(self, stream, tell):
        if tell:
            self.write_frame(RESET, stream.number)
        self.forget(stream, hard=True)

    # From the server.

    def on_frame(self, frame):
        """One of the server's egress frames (frames.Frame)."""
        stream = self.streams.get(frame.stream)
        if stream is None:
            return  # a stream PID 1 has already let go
        kind = frame.egress_type
        if kind == DATA:
            stream.outbound += frame.payload
        elif kind == CREDIT:
            stream.credit += frame.value
        elif kind == FIN:
            stream.server_ended = True
        elif kind == RESET:
            self.reset(stream, tell=False)
            return
        self.settle(stream)

    def close(self):
        """The run is over (every process of it has ended): each stream left is reset, so the
        server's account of it is complete before the trailer, and the listener closed."""
        for stream in list(self.streams.values()):
            self.reset(stream, tell=True)
        self.loop.remove(self.listener.fileno())
        self.listener.close()


def serve_stdin(loop, relay):
    """A one-shot run's stdin once its bundle is read: the server's egress frames only."""
    inbox = frames.Reader(skip_nul=True, kinds=(frames.EGRESS,))

    def on_stdin(_):
        try:
            data = os.read(0, processes.CHUNK)
        except OSError as error:
            if error.errno == errno.EAGAIN:
                return
            data = b""
        if not data:
            loop.remove(0)
            return
        try:
            arrived = inbox.feed(data)
        except ValueError:
            loop.remove(0)  # only the server writes stdin: nothing more of it can be read
            return
        for frame in arrived:
            relay.on_frame(frame)

    loop.add(0, processes.READABLE, on_stdin)
