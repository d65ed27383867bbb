import json
import os
import subprocess
import sys
import unittest

from support import DOCKER
from scs_launcher import report, session


class ExceptionRecordTest(unittest.TestCase):
    def test_the_last_whole_record_counts(self):
        forged = json.dumps({"type": "Forged", "message": "", "traceback": ""}).encode()
        real = json.dumps({"type": "ValueError", "message": "no", "traceback": "tb"}).encode()
        self.assertEqual(report.last_exception_record([forged + b"\n", real + b"\n"])["type"],
                         "ValueError")
        # A line the program left unfinished spoils the record written after it.
        self.assertIsNone(report.last_exception_record([b"unfinished", real + b"\n"]))

    def test_hostile_records_are_no_record(self):
        for chunks in ([b"[" * 5000 + b"]" * 5000 + b"\n"], [b"{" * 100000 + b"\n"],
                       [b'{"type": 1, "message": "", "traceback": ""}\n'], [b"\xff\xfe\n"], []):
            with self.subTest(chunks=chunks[:1][0][:20] if chunks else b""):
                self.assertIsNone(report.last_exception_record(chunks))

    def test_texts_are_valid_and_capped(self):
        record = report.exception_record({"type": "E\udcff", "message": "m" * 20000,
                                          "traceback": "t"})
        self.assertEqual(record["type"], "E\ufffd")
        self.assertEqual(len(record["message"]), report.MAX_TEXT_BYTES)
        # A lone surrogate, as JSON from JavaScript carries half an emoji ("\\ud83d").
        lone = json.loads('{"type": "Error", "message": "bad: \\ud83d", "traceback": ""}')
        self.assertEqual(report.exception_record(lone)["message"], "bad: \ufffd")
        self.assertEqual(report.bounded_result("\ud83d!", 100), "\ufffd!")


class WarmSecondsTest(unittest.TestCase):
    def test_only_the_interpreters_first_line_says_how_long_the_warm_imports_took(self):
        first = json.dumps({"warm_seconds": 0.75}).encode() + b"\n"
        forged = json.dumps({"warm_seconds": 99.0}).encode() + b"\n"
        self.assertEqual(report.warm_seconds([first, forged]), 0.75)
        self.assertIsNone(report.warm_seconds([b'{"warm_seconds": null}\n', forged]))
        for chunks in ([], [b'{"warm_seconds": 0.5}'], [b'{"warm_seconds": true}\n'],
                       [b'{"warm_seconds": -1.0}\n'], [b'{"warm_seconds": 1e9}\n'],
                       [b"[" * 5000 + b"\n"]):
            with self.subTest(chunks=chunks):
                self.assertIsNone(report.warm_seconds(chunks))
        # An exception record after it is still the last one.
        real = json.dumps({"type": "ValueError", "message": "no", "traceback": "tb"}).encode()
        self.assertEqual(report.last_exception_record([first, real + b"\n"])["type"],
                         "ValueError")
        self.assertIsNone(report.last_exception_record([first]))


class TrailerTest(unittest.TestCase):
    def test_the_end_marker_then_one_line_of_json(self):
        program = (
            "import sys; sys.path.insert(0, sys.argv[1])\n"
            "from scs_launcher import report, protocol\n"
            "report.write_trailer('ab' * 16, {'code': 3}, None, [('a.txt', b'hi')], 2,\n"
            "    extra={protocol.TRAILER_RESULT: None, protocol.TRAILER_SESSION_OVER: False,\n"
            "           protocol.TRAILER_REFUSED: 'why'})\n")
        done = subprocess.run([sys.executable, "-I", "-c", program, DOCKER], capture_output=True)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(done.stderr, b"\0SCS-END-" + b"ab" * 16 + b"\0")
        prefix = b"\n\0SCS-TRAILER-" + b"ab" * 16 + b"\0"
        self.assertTrue(done.stdout.startswith(prefix))
        line = done.stdout[len(prefix):]
        self.assertTrue(line.endswith(b"\n") and line.count(b"\n") == 1)
        trailer = json.loads(line)
        self.assertEqual(trailer["exit"], {"code": 3})
        self.assertEqual(trailer["files"], [{"path": "a.txt", "size": 2, "content_base64": "aGk="}])
        self.assertEqual((trailer["files_truncated"], trailer["files_omitted"]), (True, 2))
        self.assertEqual(trailer["refused"], "why")
        self.assertNotIn("result", trailer)
        self.assertNotIn("session_over", trailer)

    def test_the_golden_trailers_are_written_byte_for_byte(self):
        # tests/unit/side_channel_test.cc reads the same bytes with the server's parser.
        golden = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "golden",
                              "trailers.json")
        with open(golden) as file:
            document = json.load(file)
        nonce = document["nonce"]
        program = (
            "import json, sys; sys.path.insert(0, sys.argv[1])\n"
            "from scs_launcher import report\n"
            "w = json.loads(sys.argv[2])\n"
            "report.write_trailer(sys.argv[3], w['exit'], w['exception'],\n"
            "    [(p, c.encode('latin-1')) for p, c in w['files']], w['omitted'],\n"
            "    extra=w['extra'])\n")
        prefix = b"\n\0SCS-TRAILER-" + nonce.encode() + b"\0"
        self.assertGreaterEqual(len(document["cases"]), 4)
        for case in document["cases"]:
            with self.subTest(case=case["name"]):
                done = subprocess.run([sys.executable, "-I", "-c", program, DOCKER,
                                       json.dumps(case["write"]), nonce], capture_output=True)
                self.assertEqual(done.returncode, 0, done.stderr)
                self.assertEqual(done.stdout, prefix + case["stdout"].encode("latin-1"))

    def test_exit_records_from_wait_statuses(self):
        pid = os.fork()
        if pid == 0:
            os._exit(7)
        self.assertEqual(report.exit_record(os.waitpid(pid, 0)[1]), {"code": 7})
        pid = os.fork()
        if pid == 0:
            os.kill(os.getpid(), 9)
        self.assertEqual(report.exit_record(os.waitpid(pid, 0)[1]), {"signal": 9})


class SessionAnswerTest(unittest.TestCase):
    def test_a_good_answer_reads_and_anything_malformed_is_a_failed_run(self):
        good = {"run": 1, "exit": {"code": 0}, "exception": None, "result": "'x'"}
        self.assertEqual(session.read_answer(good, 64),
                         {"exit": {"code": 0}, "exception": None, "result": "'x'"})
        failed = {"exit": {"code": 1}, "exception": None, "result": None}
        for bad in (None, [], {"exit": {"code": 256}}, {"exit": {"code": True}}, {"exit": "0"}):
            with self.subTest(bad=bad):
                self.assertEqual(session.read_answer(bad, 64), failed)

    def test_a_result_is_cut_to_its_cap(self):
        answer = session.read_answer({"exit": {"code": 0}, "result": "é" * 1000}, 64)
        self.assertLessEqual(len(answer["result"].encode()), 64 + 64)


if __name__ == "__main__":
    unittest.main()
