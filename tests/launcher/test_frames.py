"""The stdin frames' codec (scs_launcher/frames.py) against the streams of
tests/golden/stdin_frames.json, which tests/unit/launcher_frames_test.cc decodes with the
server's codec (launcher_frames.h): split anywhere, each stream is the same frames or refused."""

import json
import os
import unittest

from support import DOCKER
from scs_launcher import frames, protocol

GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "golden",
                      "stdin_frames.json")


def expected(case):
    out = []
    for frame in case["frames"]:
        out.append(frames.Frame(frame["kind"], frame.get("payload", "").encode("latin-1"),
                                frame.get("seconds", 0), frame.get("type", "").encode("ascii"),
                                frame.get("stream", 0), frame.get("value", 0)))
    return out


def decode(data, splits, skip_nul, kinds):
    reader = frames.Reader(skip_nul=skip_nul, kinds=kinds)
    got, at = [], 0
    for split in list(splits) + [len(data)]:
        got += reader.feed(data[at:split])
        at = split
    return got


class GoldenStreamsTest(unittest.TestCase):
    def test_every_stream_decodes_as_the_golden_file_says_wherever_it_is_split(self):
        self.assertTrue(frames.__file__.startswith(os.path.abspath(DOCKER)))
        with open(GOLDEN) as golden:
            cases = json.load(golden)["cases"]
        self.assertGreaterEqual(len(cases), 20)
        for case in cases:
            data = case["bytes"].encode("latin-1")
            skip_nul = case.get("skip_nul", False)
            kinds = case.get("kinds", (frames.RUN, frames.INTERRUPT, frames.SESSION, frames.EGRESS))
            ways = [[], list(range(1, len(data)))] + [[at] for at in range(1, len(data))]
            for splits in ways:
                with self.subTest(case=case["name"], splits=splits[:3]):
                    if case.get("error"):
                        with self.assertRaises(ValueError):
                            decode(data, splits, skip_nul, kinds)
                    else:
                        self.assertEqual(decode(data, splits, skip_nul, kinds), expected(case))

    def test_a_refused_stream_stays_refused(self):
        reader = frames.Reader()
        with self.assertRaises(ValueError):
            reader.feed(b"SCS-BAD\n")
        with self.assertRaises(ValueError):
            reader.feed(frames.interrupt_frame())


class EncoderTest(unittest.TestCase):
    def test_each_encoder_writes_the_golden_bytes(self):
        with open(GOLDEN) as golden:
            encoded = json.load(golden)["encoded"]
        self.assertGreaterEqual(len(encoded), 7)
        for one in encoded:
            frame = expected({"frames": [one["frame"]]})[0]
            written = {frames.RUN: lambda: frames.run_frame(frame.payload),
                       frames.INTERRUPT: frames.interrupt_frame,
                       frames.SESSION: lambda: frames.session_frame(frame.seconds),
                       frames.EGRESS: lambda: frames.egress_frame(
                           frame.egress_type, frame.stream, frame.value, frame.payload)}
            with self.subTest(frame=one["frame"]):
                self.assertEqual(written[frame.kind](), one["bytes"].encode("latin-1"))

    def test_what_is_written_reads_back(self):
        written = (frames.session_frame(610) + frames.run_frame(b"\0bundle\n") +
                   frames.interrupt_frame() + frames.egress_frame(b"D", 7, payload=b"data") +
                   frames.egress_frame(b"C", 7, 4096))
        self.assertEqual(written[:17], b"SCS-SESSION 610\nS")
        self.assertEqual(frames.Reader().feed(written), [
            frames.Frame(frames.SESSION, seconds=610), frames.Frame(frames.RUN, b"\0bundle\n"),
            frames.Frame(frames.INTERRUPT),
            frames.Frame(frames.EGRESS, b"data", egress_type=b"D", stream=7, value=4),
            frames.Frame(frames.EGRESS, egress_type=b"C", stream=7, value=4096)])

    def test_the_largest_run_frame_header_is_within_the_header_cap(self):
        header = frames.run_frame(b"")[:-2] + str(protocol.MAX_FRAME_BYTES).encode()
        self.assertLessEqual(len(header), protocol.MAX_FRAME_HEADER_BYTES)
        self.assertEqual(frames.parse_header(header)[1], protocol.MAX_FRAME_BYTES)


if __name__ == "__main__":
    unittest.main()
