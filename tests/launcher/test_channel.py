"""The inner channel between PID 1 and a session's interpreter (scs_launcher/channel.py), and the
three interpreters that speak it: Python's (child/session.py) through the codec, bash's
(child/session.bash) with its placeholders filled in from it, JavaScript's (child/runner.js)
with the words languages.py passes it. Each interpreter is run here against PID 1's side of the
codec, with the channel's words changed where the interpreter takes them from it, so a side that
writes a word of its own fails."""

import fcntl
import json
import os
import re
import socket
import subprocess
import tempfile
import unittest
from unittest import mock

from support import DOCKER as ROOT
from scs_launcher import channel, languages, processes, report, session
from scs_launcher.child import STUB

CHILD = os.path.join(ROOT, "scs_launcher", "child")
# Markers unlike the real ones, and a piece size that splits every answer.
OTHER_WORDS = {"MORE": b"-", "LAST": b"=", "PIECE_BYTES": 16}
# Where a test runs an interpreter's own code path, its run fails for want of its code file.
NO_WORKSPACE = not os.path.exists(languages.WORKSPACE)


def other_words():
    return mock.patch.multiple(channel, **OTHER_WORDS)


def json_string(size):
    """A message whose JSON is `size` bytes."""
    return "x" * (size - 2)


class CodecTest(unittest.TestCase):
    def test_every_message_is_as_it_always_was_byte_for_byte(self):
        self.assertEqual(channel.command(1, 100), b'{"run": 1, "result_cap": 100}')
        self.assertEqual(channel.command(1, 100, {}), b'{"run": 1, "result_cap": 100}')
        self.assertEqual(channel.command(2, 9, {"HTTPS_PROXY": "http://h:1"}),
                         b'{"run": 2, "result_cap": 9, '
                         b'"environment": {"HTTPS_PROXY": "http://h:1"}}')
        self.assertEqual(channel.command_line(3, 4096), b"3 4096\n")
        self.assertEqual(channel.command_line(3, 4096, "/tmp/.scs-stdin-a1/stdin"),
                         b"3 4096 /tmp/.scs-stdin-a1/stdin\n")
        self.assertEqual(channel.pieces(channel.started(4)), [b'.{"started": 4}'])
        self.assertEqual(channel.pieces(channel.answer(4, 0)),
                         [b'.{"run": 4, "exit": {"code": 0}, "exception": null, "result": null}'])
        exception = {"type": "ValueError", "message": "m", "traceback": "t"}
        self.assertEqual(channel.answer(5, 1, exception, "'r'"),
                         {"run": 5, "exit": {"code": 1}, "exception": exception, "result": "'r'"})

    def test_a_command_reads_back_as_it_was_written(self):
        self.assertEqual(channel.read_command(channel.command(7, 64)), (7, 64, None))
        self.assertEqual(channel.read_command(channel.command(7, 64, {"A": "b"})),
                         (7, 64, {"A": "b"}))

    def test_an_answer_goes_in_pieces_of_at_most_piece_bytes_and_only_the_last_is_marked_last(self):
        size = channel.PIECE_BYTES
        for total, count in ((2, 1), (size - 1, 1), (size, 1), (size + 1, 2), (2 * size, 2),
                             (2 * size + 1, 3)):
            with self.subTest(total=total):
                message = json_string(total)
                records = channel.pieces(message)
                self.assertEqual(len(records), count)
                self.assertEqual([r[:1] for r in records],
                                 [channel.MORE] * (count - 1) + [channel.LAST])
                self.assertTrue(all(len(r) <= 1 + size for r in records))
                self.assertEqual(b"".join(r[1:] for r in records), json.dumps(message).encode())

    def test_pid1_joins_the_pieces_and_an_answer_cut_or_too_large_is_none_at_its_end(self):
        answers = channel.Answers(max_bytes=3 * channel.PIECE_BYTES)
        message = json_string(2 * channel.PIECE_BYTES + 5)
        records = channel.pieces(message)
        for record in records[:-1]:
            self.assertEqual(answers.feed(record), (False, None))
        self.assertEqual(answers.feed(records[-1]), (True, json.dumps(message).encode()))
        # A record the kernel cut breaks its answer only.
        self.assertEqual(answers.feed(records[0], truncated=True), (False, None))
        self.assertEqual(answers.feed(records[-1]), (True, None))
        self.assertEqual(answers.feed(b'.{"started": 1}'), (True, b'{"started": 1}'))
        for record in channel.pieces(json_string(4 * channel.PIECE_BYTES)):
            last, data = answers.feed(record)
        self.assertEqual((last, data), (True, None))
        self.assertEqual(answers.feed(b"."), (True, b""))

    def test_the_markers_are_bytes_a_single_quoted_printf_format_takes_as_they_are(self):
        self.assertNotEqual(channel.MORE, channel.LAST)
        for marker in (channel.MORE, channel.LAST):
            self.assertEqual(len(marker), 1)
            self.assertTrue(0x21 <= marker[0] < 0x7F)
            self.assertNotIn(marker, b"'%\\")


class BashTextTest(unittest.TestCase):
    def test_the_file_writes_no_marker_and_the_shell_gets_the_channels(self):
        with open(os.path.join(CHILD, "session.bash")) as driver:
            written = driver.read()
        self.assertEqual(len(re.findall(r"printf '@LAST@\{", written)), 2)
        self.assertNotRegex(written, r"printf '[^@]")
        text = languages.session_argv(languages.BASH, ROOT)[4]
        self.assertIsNone(languages.PLACEHOLDER.search(text))
        self.assertNotIn("@LAST@", text)
        last = channel.LAST.decode()
        self.assertIn("builtin printf '%s{\"started\":%%s}' \"$__scs_run\" >&4" % last, text)
        self.assertIn("builtin printf '%s{\"run\":%%s,\"exit\":{\"code\":%%s}}'" % last, text)
        self.assertIn("builtin read -r -u %d " % channel.COMMAND_FD, text)
        with other_words():
            self.assertIn("builtin printf '={\"started\"",
                          languages.session_argv(languages.BASH, ROOT)[4])

    def test_a_placeholder_the_channel_does_not_have_stops_the_shell_from_starting(self):
        with tempfile.TemporaryDirectory() as root:
            os.makedirs(os.path.join(root, "scs_launcher", "child"))
            with open(os.path.join(root, "scs_launcher", "child", "session.bash"), "w") as f:
                f.write("builtin printf '@LAST@@NO_SUCH_WORD@' >&4\n")
            with self.assertRaisesRegex(ValueError, "@NO_SUCH_WORD@ is no word of the channel"):
                languages.session_argv(languages.BASH, root)


class RunnerWordsTest(unittest.TestCase):
    def test_languages_passes_runner_js_the_channels_words(self):
        argv = languages.session_argv(languages.JAVASCRIPT, ROOT)
        self.assertEqual(argv[-4:], ["session", "+", ".", str(32 << 10)])
        with other_words():
            self.assertEqual(languages.session_argv(languages.JAVASCRIPT, ROOT)[-3:],
                             ["-", "=", "16"])

    def test_runner_js_writes_its_answers_with_no_word_of_its_own(self):
        with open(os.path.join(CHILD, "runner.js")) as runner:
            source = runner.read()
        start = source.index("const answer = (message) => {")
        writer = source[start:source.index("\n  };\n", start)]
        self.assertIn("fs.writeSync(4, ", writer)
        self.assertNotRegex(writer, r"""['"`][.+]['"`]|<<|\d\d""")
        self.assertNotRegex(source, r"PIECE_BYTES\s*=|32 << 10|Buffer\.from\(['\"][.+]['\"]")


class Interpreter:
    """A session's interpreter started as PID 1 starts it, with commands (bash, javascript) on
    channel.COMMAND_FD and the channel on channel.ANSWER_FD; or, for Python, the channel's fd
    in its argv. Killed, should the test end before it."""

    def __init__(self, test, argv, python=False):
        self.ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.ours.settimeout(30)
        self.records = []
        self.answers = channel.Answers(session.MAX_ANSWER_BYTES)
        self.commands = None
        if python:
            self.child = subprocess.Popen(argv + [str(theirs.fileno())], pass_fds=[theirs.fileno()],
                                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE)
        else:
            commands_r, self.commands = os.pipe()

            def at():
                moved = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
                         for fd in (commands_r, theirs.fileno())]
                os.dup2(moved[0], channel.COMMAND_FD)
                os.dup2(moved[1], channel.ANSWER_FD)

            self.child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, close_fds=False,
                                          preexec_fn=at)
            os.close(commands_r)
        theirs.close()
        test.addCleanup(self.kill)

    def kill(self):
        if self.commands is not None:
            os.close(self.commands)
        if self.child.poll() is None:
            self.child.kill()
            self.child.communicate()
        for stream in (self.child.stdout, self.child.stderr):
            stream.close()
        self.ours.close()

    def answer(self):
        """The next answer, as PID 1 reads it."""
        while True:
            record = self.ours.recv(1 << 16)
            if not record:
                raise AssertionError("the interpreter closed the channel")
            self.records.append(record)
            last, data = self.answers.feed(record)
            if last:
                return None if data is None else report.parse_json(data)

    def end(self):
        """Closes its commands and channel; its stdout and stderr once it has exited."""
        if self.commands is not None:
            os.close(self.commands)
            self.commands = None
        self.ours.close()
        out, err = self.child.communicate(timeout=60)
        return out.decode(), err.decode()


def run_through(test, interpreter, seq, deliver):
    """Delivers run `seq` and reads its two answers as PID 1 does: the run's checked account."""
    deliver()
    test.assertEqual(interpreter.answer(), {channel.STARTED: seq})
    answer = interpreter.answer()
    test.assertEqual(answer[channel.RUN], seq)
    return session.read_answer(answer, 4096)


class InterpretersTest(unittest.TestCase):
    def setUp(self):
        self.temp = tempfile.TemporaryDirectory()
        self.addCleanup(self.temp.cleanup)

    def test_bash_answers_in_the_channels_words(self):
        script = os.path.join(self.temp.name, "main.sh")
        with open(script, "w") as main:
            main.write('IFS= read -r line; printf "got %s\\n" "$line"; return 7\n')
        stdin = os.path.join(self.temp.name, "stdin")
        with open(stdin, "w") as data:
            data.write("hello\n")
        with other_words():
            argv = languages.session_argv(languages.BASH, ROOT)
            self.assertIn(languages.code_path(languages.BASH), argv[4])
            argv[4] = argv[4].replace(languages.code_path(languages.BASH), script)
            shell = Interpreter(self, argv)
            for seq, path in ((1, stdin), (2, None)):
                line = channel.command_line(seq, 100, path)
                account = run_through(self, shell, seq, lambda: os.write(shell.commands, line))
                self.assertEqual(account["exit"], {"code": 7})
        self.assertEqual(shell.end(), ("got hello\ngot \n", ""))
        self.assertEqual(shell.child.returncode, 0)
        self.assertEqual(len(shell.records), 4)
        self.assertTrue(all(record[:1] == b"=" for record in shell.records))

    @unittest.skipUnless(os.access(languages.NODE_PATH, os.X_OK), "no Node.js here")
    @unittest.skipUnless(NO_WORKSPACE, "this machine has a /workspace")
    def test_javascript_answers_in_the_words_it_is_given(self):
        # The real runner.js: no /workspace/main.js here, so each run is an uncaught ENOENT,
        # whose record is an answer of many pieces at this piece size.
        with other_words():
            node = Interpreter(self, languages.session_argv(languages.JAVASCRIPT, ROOT))
            for seq in (1, 2):
                line = channel.command_line(seq, 100)
                account = run_through(self, node, seq, lambda: os.write(node.commands, line))
                self.assertEqual(account["exit"], {"code": 1})
                self.assertIn("ENOENT", account["exception"]["message"])
        node.end()
        self.assertEqual(node.child.returncode, 0)
        self.assertGreater(len(node.records), 10)
        self.assertTrue(all(len(record) <= 17 for record in node.records))
        ends = [i for i, record in enumerate(node.records) if record[:1] == b"="]
        self.assertEqual(len(ends), 4)
        self.assertTrue(all(record[:1] in b"-=" for record in node.records))

    @unittest.skipUnless(os.access(languages.NODE_PATH, os.X_OK), "no Node.js here")
    def test_javascript_code_sees_the_argv_it_always_did(self):
        # A copy of runner.js whose workspace is a temporary one, so that code runs.
        with open(os.path.join(CHILD, "runner.js")) as runner:
            source = runner.read()
        workspace = os.path.join(self.temp.name, "workspace")
        os.mkdir(workspace)
        for name in ("PATH", "DIRECTORY"):
            found = f"const {name} = '/workspace"
            self.assertEqual(source.count(found), 1)
            source = source.replace(found, f"const {name} = '{workspace}")
        copy = os.path.join(self.temp.name, "runner.js")
        with open(copy, "w") as out:
            out.write(source)
        with open(os.path.join(workspace, "main.js"), "w") as main:
            main.write("console.log('out');\n"
                       "process.argv.slice(2).join(',') + '/' + 'x'.repeat(40)\n")
        with other_words():
            argv = languages.session_argv(languages.JAVASCRIPT, ROOT)
            argv[argv.index(languages.runner(ROOT))] = copy
            node = Interpreter(self, argv)
            line = channel.command_line(1, 100)
            account = run_through(self, node, 1, lambda: os.write(node.commands, line))
        self.assertEqual(account, {"exit": {"code": 0}, "exception": None,
                                   "result": "'session/" + "x" * 40 + "'"})
        self.assertEqual(node.end()[0], "out\n")

    @unittest.skipUnless(NO_WORKSPACE, "this machine has a /workspace")
    def test_python_answers_through_the_codec(self):
        # No /workspace/main.py here: the run is an uncaught FileNotFoundError.
        argv = [processes.PYTHON, "-I", "-c", STUB, os.path.abspath(ROOT),
                "scs_launcher.child.session"]
        python = Interpreter(self, argv, python=True)
        for seq in (1, 2):
            stdin_r, stdin_w = os.pipe()
            os.close(stdin_w)

            def deliver():
                socket.send_fds(python.ours, [channel.command(seq, 100)], [stdin_r])
                os.close(stdin_r)

            account = run_through(self, python, seq, deliver)
            self.assertEqual(account["exit"], {"code": 1})
            self.assertEqual(account["exception"]["type"], "FileNotFoundError")
        python.end()
        self.assertEqual(python.child.returncode, 0)
        self.assertTrue(all(record[:1] == channel.LAST for record in python.records))


if __name__ == "__main__":
    unittest.main()
