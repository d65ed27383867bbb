"""The session's PID 1 (scs_launcher/session.py): its parts that need no interpreter."""

import os
import unittest
from unittest import mock

from support import DOCKER
from scs_launcher import session


class RemovingLoop:
    def __init__(self):
        self.removed = []

    def remove(self, fd):
        self.removed.append(fd)


class DrainTest(unittest.TestCase):
    def test_streams_whose_writers_ended_are_drained_and_forgotten(self):
        # As when the interpreter died (os._exit) before the loop saw its pipes end: both
        # streams reach their end inside one drain.
        self.assertTrue(session.__file__.startswith(os.path.abspath(DOCKER)))
        server = session.Session.__new__(session.Session)
        server.loop = RemovingLoop()
        server.current = None
        server.streams = {}
        for stream, text in ((1, b"out"), (2, b"err")):
            read, write = os.pipe()
            os.write(write, text)
            os.close(write)
            os.set_blocking(read, False)
            server.streams[read] = stream
        ends = list(server.streams)
        with mock.patch.object(session.report, "write_all") as written:
            server.drain()
        self.assertEqual(server.streams, {})
        self.assertEqual(server.loop.removed, ends)
        self.assertEqual([call.args for call in written.call_args_list],
                         [(b"out", 1), (b"err", 2)])


if __name__ == "__main__":
    unittest.main()
