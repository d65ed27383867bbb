"""PID 1's egress relay (scs_launcher/relay.py): the server's frames on stdin, and a connection
carried as frames on stdout, with the loop PID 1 serves it from."""

import fcntl
import os
import socket
import threading
import unittest
from unittest import mock

from support import DOCKER
from scs_launcher import frames, processes, relay

NONCE = "0123456789abcdef0123456789abcdef"
F_SETPIPE_SZ = 1031


def egress(kind, stream, value, payload=b""):
    """The server's egress frame as PID 1's reader gives it."""
    return frames.Frame(frames.EGRESS, payload, egress_type=kind, stream=stream, value=value)


class ProxyEnvironmentTest(unittest.TestCase):
    def test_brokering_adds_the_placeholders_and_one_bundle_for_every_client(self):
        import tempfile
        self.assertTrue(relay.__file__.startswith(os.path.abspath(DOCKER)))
        ca = "-----BEGIN CERTIFICATE-----\nMIIBdz==\n-----END CERTIFICATE-----\n"
        with tempfile.TemporaryDirectory() as directory, \
                mock.patch.object(relay, "CA_BUNDLE_DIRECTORY", directory + "/egress"), \
                mock.patch.object(relay, "SYSTEM_CA_BUNDLE", directory + "/system.crt"):
            with open(directory + "/system.crt", "w") as system:
                system.write("SYSTEM CAS\n")
            environment = relay.proxy_environment({"egress_ca": ca,
                                                   "egress_environment": {"TOKEN": "p"}})
            self.assertEqual(environment["TOKEN"], "p")
            paths = {environment[name] for name in ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE",
                                                    "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS")}
            self.assertEqual(paths, {directory + "/egress/ca-bundle.pem"})
            with open(paths.pop()) as bundle:
                self.assertEqual(bundle.read(), "SYSTEM CAS\n" + ca)
        self.assertNotIn("SSL_CERT_FILE", relay.proxy_environment())
        self.assertEqual(relay.proxy_environment()["HTTPS_PROXY"], "http://127.0.0.1:3128")


class RelayTest(unittest.TestCase):
    """A real connection on loopback through the relay, PID 1's stdout a pipe the test reads."""

    def setUp(self):
        self.out_r, out_w = os.pipe()
        # Room for all a test sends: PID 1 writes frames blocking, and the test reads them only
        # between turns of the loop.
        fcntl.fcntl(out_w, F_SETPIPE_SZ, 1 << 20)
        self.saved_stdout = os.dup(1)
        os.dup2(out_w, 1)
        os.close(out_w)
        self.loop = processes.Loop()
        with mock.patch.object(relay, "RELAY_ADDRESS", ("127.0.0.1", 0)):
            self.relay = relay.Relay(self.loop, NONCE)
        self.client = socket.create_connection(self.relay.listener.getsockname(), timeout=5)
        self.pending = b""

    def tearDown(self):
        os.dup2(self.saved_stdout, 1)
        os.close(self.saved_stdout)
        os.close(self.out_r)
        self.client.close()
        self.relay.close()
        self.loop.close()

    def frames(self, count):
        """The next `count` frames PID 1 wrote: (type, stream, value, payload)."""
        marker = relay.STDOUT_MARKER + NONCE.encode() + b"\0"
        data, got = self.pending, []
        while len(got) < count:
            self.loop.run(lambda: False, timeout=0.05)
            os.set_blocking(self.out_r, False)
            try:
                data += os.read(self.out_r, 1 << 16)
            except BlockingIOError:
                pass
            while data.startswith(marker) and len(data) >= len(marker) + relay.HEADER.size:
                kind, number, value = relay.HEADER.unpack_from(data, len(marker))
                size = value if kind == relay.DATA else 0
                end = len(marker) + relay.HEADER.size + size
                if len(data) < end:
                    break
                got.append((kind, number, value, data[end - size:end]))
                data = data[end:]
        self.pending = data  # what follows stays for the next call
        return got

    def test_a_connection_is_carried_both_ways(self):
        self.assertEqual(self.frames(1), [(relay.OPEN, 1, 0, b"")])
        self.client.sendall(b"hello")
        self.assertEqual(self.frames(1), [(relay.DATA, 1, 5, b"hello")])
        self.relay.on_frame(egress(relay.DATA, 1, 5, b"world"))
        self.assertEqual(self.frames(1), [(relay.CREDIT, 1, 5, b"")])  # written: credit back
        self.assertEqual(self.client.recv(5), b"world")
        self.relay.on_frame(egress(relay.FIN, 1, 0))
        self.loop.run(lambda: False, timeout=0.05)
        self.assertEqual(self.client.recv(5), b"")  # the server's FIN: the program reads EOF
        self.client.shutdown(socket.SHUT_WR)
        self.assertEqual(self.frames(1), [(relay.FIN, 1, 0, b"")])
        self.assertEqual(self.relay.streams, {})

    def test_no_more_than_the_credit_is_sent(self):
        self.frames(1)
        # From a thread: the relay reads only while the loop runs, in frames().
        sender = threading.Thread(target=self.client.sendall,
                                  args=(b"x" * (relay.INITIAL_WINDOW + 10000),))
        sender.start()
        self.addCleanup(sender.join)
        sent = 0
        while sent < relay.INITIAL_WINDOW:
            sent += sum(len(payload) for _, _, _, payload in self.frames(1))
        self.loop.run(lambda: False, timeout=0.2)
        self.assertEqual(sent, relay.INITIAL_WINDOW)
        self.relay.on_frame(egress(relay.CREDIT, 1, 10000))
        rest = 0
        while rest < 10000:
            rest += sum(len(payload) for _, _, _, payload in self.frames(1))
        self.assertEqual(rest, 10000)

    def test_frames_fit_one_atomic_write(self):
        self.frames(1)
        sender = threading.Thread(target=self.client.sendall, args=(b"y" * 100000,))
        sender.start()
        self.addCleanup(sender.join)
        marker = len(relay.STDOUT_MARKER) + len(NONCE) + 1
        for _, _, _, payload in self.frames(5):
            self.assertLessEqual(marker + relay.HEADER.size + len(payload), relay.MAX_STDOUT_FRAME)

    def test_a_reset_from_the_server_resets_the_program(self):
        self.frames(1)
        self.relay.on_frame(egress(relay.RESET, 1, 0))
        with self.assertRaises((ConnectionResetError, OSError)):
            self.client.sendall(b"z")
            self.client.recv(1) or (_ for _ in ()).throw(ConnectionResetError())
        self.assertEqual(self.relay.streams, {})


if __name__ == "__main__":
    unittest.main()
