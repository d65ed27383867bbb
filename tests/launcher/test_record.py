import contextlib
import io
import os
import unittest

from support import DOCKER
from scs_launcher.child import record, session


class TreeTest(unittest.TestCase):
    def test_these_tests_read_the_trees_launcher(self):
        self.assertTrue(os.path.abspath(record.__file__).startswith(os.path.abspath(DOCKER)))


class HostileStr(str):
    def encode(self, *args, **kwargs):
        return self

    def decode(self, *args, **kwargs):
        return self

    def __len__(self):
        return 0

    def __str__(self):
        return self


class UncaughtTest(unittest.TestCase):
    def uncaught(self, error):
        with contextlib.redirect_stderr(io.StringIO()):
            try:
                raise error
            except BaseException as caught:
                return record.uncaught(caught, __file__)

    def test_an_ordinary_error(self):
        got = self.uncaught(ValueError("invalid literal"))
        self.assertEqual(got["type"], "ValueError")
        self.assertEqual(got["message"], "invalid literal")
        self.assertIn("ValueError: invalid literal", got["traceback"])

    def test_an_error_whose_text_lies_or_fails(self):
        class Lies(Exception):
            def __str__(self):
                return HostileStr("x" * 100000)

        class Fails(Exception):
            __module__ = 42

            def __str__(self):
                raise RuntimeError("no")

        lies = self.uncaught(Lies())
        self.assertEqual(lies["message"], "x" * record.MAX_TEXT_BYTES)
        self.assertIs(type(lies["message"]), str)
        self.assertLessEqual(len(lies["traceback"].encode()), record.MAX_TEXT_BYTES)
        fails = self.uncaught(Fails())
        self.assertEqual(fails["message"], "<unprintable UncaughtTest."
                         "test_an_error_whose_text_lies_or_fails.<locals>.Fails object>")


class ResultTest(unittest.TestCase):
    def test_a_hostile_repr_is_cut_to_its_cap_whatever_it_claims(self):
        text = session.cut(record.plain(HostileStr("y" * 40_000_000)), 65536)
        self.assertIs(type(text), str)
        self.assertLess(len(text.encode()), 65536 + 64)
        self.assertIn("bytes omitted", text)

    def test_a_short_result_is_whole(self):
        self.assertEqual(session.cut(record.plain("'é'"), 64), "'é'")

    def test_system_exit_codes_as_the_interpreter_makes_them(self):
        with contextlib.redirect_stderr(io.StringIO()) as printed:
            codes = [session.exit_code(SystemExit(arg)) for arg in (None, 0, 3, 256 + 5, "bye")]
        self.assertEqual(codes, [0, 0, 3, 5, 1])
        self.assertEqual(printed.getvalue(), "bye\n")


if __name__ == "__main__":
    unittest.main()
