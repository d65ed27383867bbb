import os
import sys
import tempfile
import threading
import time
import unittest

from support import DOCKER
from scs_launcher.child import program


class WarmTest(unittest.TestCase):
    """The warm imports stop between modules once the run's byte is there."""

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        for name in ("scs_slow_a", "scs_slow_b", "scs_slow_c"):
            with open(os.path.join(self.dir.name, name + ".py"), "w") as module:
                module.write("import time\ntime.sleep(0.3)\n")
        sys.path.insert(0, self.dir.name)
        self.read, self.write = os.pipe()

    def tearDown(self):
        sys.path.remove(self.dir.name)
        for name in ("scs_slow_a", "scs_slow_b", "scs_slow_c"):
            sys.modules.pop(name, None)
        os.close(self.read)
        os.close(self.write)
        self.dir.cleanup()

    def test_these_tests_read_the_trees_launcher(self):
        self.assertTrue(os.path.abspath(program.__file__).startswith(os.path.abspath(DOCKER)))

    def test_without_a_run_every_module_is_imported(self):
        program.warm(["scs_slow_a", "scs_slow_b", "scs_missing"], self.read)
        self.assertIn("scs_slow_a", sys.modules)
        self.assertIn("scs_slow_b", sys.modules)

    def test_a_run_that_arrives_waits_for_the_module_being_imported_only(self):
        timer = threading.Timer(0.1, lambda: os.write(self.write, b"0"))
        timer.start()
        started = time.monotonic()
        program.warm(["scs_slow_a", "scs_slow_b", "scs_slow_c"], self.read)
        waited = time.monotonic() - started
        timer.join()
        self.assertIn("scs_slow_a", sys.modules)
        self.assertNotIn("scs_slow_b", sys.modules)
        self.assertNotIn("scs_slow_c", sys.modules)
        self.assertLess(waited, 0.6)
        self.assertEqual(os.read(self.read, 1), b"0")  # the byte is left for main()

    def test_a_run_already_there_waits_for_no_import(self):
        os.write(self.write, b"1")
        program.warm(["scs_slow_a"], self.read)
        self.assertNotIn("scs_slow_a", sys.modules)


if __name__ == "__main__":
    unittest.main()
