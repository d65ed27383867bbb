import os
import unittest

from support import Workspace, tar_bytes
from scs_launcher import bundle, oneshot
from scs_launcher.rejection import Rejected


def contents(path):
    with open(path, "rb") as file:
        return file.read()


def pipe_with(data):
    """The read end of a pipe holding `data` and then its end."""
    read, write = os.pipe()
    os.write(write, data)
    os.close(write)
    return read


class StdinHeadTest(unittest.TestCase):
    """A prepared sandbox's stdin starts with a run's bundle or with the session frame."""

    def test_a_session_frame_is_told_from_a_bundle_and_nothing_after_it_is_read(self):
        fd = pipe_with(b"SCS-SESSION 3660\nSCS-RUN 3\nabc")
        try:
            self.assertEqual(oneshot.read_head(fd), oneshot.SESSION_PREFIX)
            self.assertEqual(oneshot.read_session_seconds(fd), 3660)
            self.assertEqual(os.read(fd, 64), b"SCS-RUN 3\nabc")  # left for the session's frames
        finally:
            os.close(fd)

    def test_a_bundle_is_unpacked_whole_after_its_head_was_read(self):
        archive = tar_bytes([("main.py", b"print(1)\n"), ("data/a.txt", b"a")])
        fd = pipe_with(archive)
        try:
            head = oneshot.read_head(fd)
            self.assertNotEqual(head, oneshot.SESSION_PREFIX)
            self.assertEqual(len(head), len(oneshot.SESSION_PREFIX))
            with Workspace(bundle) as workspace, os.fdopen(fd, "rb", buffering=0,
                                                          closefd=False) as raw:
                bundle.unpack(oneshot.Prefixed(head, raw))
                self.assertEqual(contents(os.path.join(workspace, "main.py")), b"print(1)\n")
                self.assertEqual(contents(os.path.join(workspace, "data/a.txt")), b"a")
        finally:
            os.close(fd)

    def test_a_short_stdin_is_its_own_head(self):
        fd = pipe_with(b"SCS")
        try:
            self.assertEqual(oneshot.read_head(fd), b"SCS")
        finally:
            os.close(fd)

    def test_a_malformed_session_frame_is_refused(self):
        for rest in (b"soon\n", b"0\n", b"\n", b"1" * 40 + b"\n", b"60"):
            fd = pipe_with(oneshot.SESSION_PREFIX + rest)
            try:
                oneshot.read_head(fd)
                with self.assertRaises(Rejected, msg=rest):
                    oneshot.read_session_seconds(fd)
            finally:
                os.close(fd)


if __name__ == "__main__":
    unittest.main()
