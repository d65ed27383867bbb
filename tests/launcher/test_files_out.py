import os
import unittest

from support import Workspace
from scs_launcher import bundle, files_out

CAPS = {"max_files": 20, "max_file_bytes": 1 << 20, "max_total_bytes": 2 << 20}


class CollectTest(unittest.TestCase):
    def test_files_come_in_name_order_a_directorys_files_before_its_subdirectories(self):
        with Workspace(bundle) as workspace:
            out = os.path.join(workspace, "out")
            os.makedirs(os.path.join(out, "b/c"))
            for path in ("z.txt", "a.txt", "b/c/deep.txt", "b/x.txt"):
                with open(os.path.join(out, path), "w") as f:
                    f.write(path)
            os.symlink("/etc/passwd", os.path.join(out, "link"))
            os.mkfifo(os.path.join(out, "fifo"))
            files, omitted = files_out.collect(out, CAPS)
            self.assertEqual([p for p, _ in files], ["a.txt", "z.txt", "b/x.txt", "b/c/deep.txt"])
            self.assertEqual(dict(files)["b/c/deep.txt"], b"b/c/deep.txt")
            self.assertEqual(omitted, 0)

    def test_a_tree_deeper_than_any_walk_should_go_is_walked_to_its_bound_without_recursion(self):
        with Workspace(bundle) as workspace:
            out = os.path.join(workspace, "out")
            path = out
            os.mkdir(path)
            top_fd = os.open(path, os.O_RDONLY)
            fd = top_fd
            for _ in range(1200):
                os.mkdir("d", dir_fd=fd)
                child = os.open("d", os.O_RDONLY, dir_fd=fd)
                if fd != top_fd:
                    os.close(fd)
                fd = child
            with open(os.open("deepest.txt", os.O_WRONLY | os.O_CREAT, dir_fd=fd), "w") as f:
                f.write("x")
            os.close(fd)
            os.close(top_fd)
            with open(os.path.join(out, "top.txt"), "w") as f:
                f.write("t")
            files, omitted = files_out.collect(out, CAPS)
            self.assertEqual([p for p, _ in files], ["top.txt"])
            self.assertGreaterEqual(omitted, 1)
            # the state of a session's out directory takes the same walk
            self.assertIn("top.txt", files_out.state(out))

    def test_caps_on_count_size_and_total_omit_and_count(self):
        with Workspace(bundle) as workspace:
            out = os.path.join(workspace, "out")
            os.mkdir(out)
            for index in range(5):
                with open(os.path.join(out, f"f{index}"), "wb") as f:
                    f.write(b"x" * 100)
            with open(os.path.join(out, "big"), "wb") as f:
                f.write(b"x" * 1000)
            files, omitted = files_out.collect(
                out, {"max_files": 3, "max_file_bytes": 500, "max_total_bytes": 250})
            self.assertEqual([p for p, _ in files], ["f0", "f1"])
            self.assertEqual(omitted, 4)

    def test_a_sessions_run_returns_only_what_it_wrote_or_changed(self):
        with Workspace(bundle) as workspace:
            out = os.path.join(workspace, "out")
            os.mkdir(out)
            for name in ("kept", "changed"):
                with open(os.path.join(out, name), "w") as f:
                    f.write("1")
            before = files_out.state(out)
            with open(os.path.join(out, "changed"), "w") as f:
                f.write("22")
            with open(os.path.join(out, "new"), "w") as f:
                f.write("3")
            files, _ = files_out.collect(out, CAPS, unchanged=before)
            self.assertEqual([p for p, _ in files], ["changed", "new"])

    def test_an_unreadable_directory_is_skipped_not_fatal(self):
        with Workspace(bundle) as workspace:
            out = os.path.join(workspace, "out")
            os.makedirs(os.path.join(out, "closed"))
            with open(os.path.join(out, "ok"), "w") as f:
                f.write("1")
            os.chmod(os.path.join(out, "closed"), 0)
            files, omitted = files_out.collect(out, CAPS)
            self.assertEqual([p for p, _ in files], ["ok"])
            if os.geteuid() != 0:
                self.assertEqual(omitted, 1)
        self.assertEqual(files_out.collect("/nonexistent/out", CAPS), ([], 0))


if __name__ == "__main__":
    unittest.main()
