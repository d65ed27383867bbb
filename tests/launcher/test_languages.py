import os
import unittest
from unittest import mock

from support import DOCKER as ROOT
from scs_launcher import languages, protocol
from scs_launcher.rejection import Rejected


class LanguagesTest(unittest.TestCase):
    def test_the_control_file_names_the_language_and_python_is_the_default(self):
        self.assertEqual(languages.of({}), languages.PYTHON)
        self.assertEqual(languages.of(None), languages.PYTHON)
        self.assertEqual(languages.of({protocol.CONTROL_LANGUAGE: "bash"}), languages.BASH)
        with self.assertRaisesRegex(Rejected, "unknown language 'ruby'"):
            languages.of({protocol.CONTROL_LANGUAGE: "ruby"})
        with self.assertRaises(Rejected):
            languages.of({protocol.CONTROL_LANGUAGE: ["bash"]})
        self.assertEqual(languages.code_path(languages.JAVASCRIPT), "/workspace/main.js")

    def test_a_missing_interpreter_is_refused_with_its_reason(self):
        with mock.patch.object(languages, "NODE_PATH", "/nonexistent/node"):
            with self.assertRaisesRegex(Rejected, "javascript is not installed"):
                languages.check_interpreter(languages.JAVASCRIPT)
        languages.check_interpreter(languages.PYTHON)  # started ahead, never looked up here

    def test_each_interpreter_is_started_by_absolute_path(self):
        bash, bash_fds = languages.run_argv(languages.BASH, ROOT, 7)
        self.assertEqual(bash, ["/usr/bin/bash", "/workspace/main.sh"])
        self.assertEqual(bash_fds, [])  # no shell command can write its exception record
        node, node_fds = languages.run_argv(languages.JAVASCRIPT, ROOT, 7)
        self.assertEqual(node_fds, [7])
        self.assertEqual(node[0], "/usr/bin/node")
        self.assertEqual(node[-2:], ["run", "7"])
        self.assertTrue(os.path.isfile(node[2]))
        session = languages.session_argv(languages.BASH, ROOT)
        self.assertEqual(session[:3], ["/usr/bin/bash", "--norc", "--noprofile"])
        self.assertIn("builtin source /workspace/main.sh", session[4])
        self.assertEqual(session[5], "main.sh")
        self.assertEqual(languages.session_argv(languages.JAVASCRIPT, ROOT)[3], "session")


if __name__ == "__main__":
    unittest.main()
