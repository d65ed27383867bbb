import io
import json
import os
import stat
import tarfile
import unittest

from support import Workspace, tar_bytes
from scs_launcher import bundle
from scs_launcher.rejection import Rejected

CONTROL = json.dumps({"nonce": "0" * 32, "out_dir": "/workspace/out", "max_files": 20,
                      "max_file_bytes": 1 << 20, "max_total_bytes": 1 << 21,
                      "watchdog_seconds": 70, "result_cap": 65536}).encode()


class UnpackTest(unittest.TestCase):
    def test_files_and_directories_arrive_and_control_members_stay_in_memory(self):
        with Workspace(bundle) as workspace:
            members, names = bundle.unpack(io.BytesIO(tar_bytes([
                ("data", None), ("data/a.csv", b"a,b\n"), ("main.py", b"print(1)\n"),
                (".scs", None), (".scs/control.json", CONTROL), (".scs/stdin", b"in")])))
            self.assertEqual(open(os.path.join(workspace, "data/a.csv"), "rb").read(), b"a,b\n")
            self.assertFalse(os.path.exists(os.path.join(workspace, ".scs")))
            self.assertEqual(members, {"control.json": CONTROL, "stdin": b"in"})
            self.assertEqual(names, {"data/a.csv", "main.py"})
            self.assertEqual(stat.S_IMODE(os.stat(os.path.join(workspace, "main.py")).st_mode),
                             0o644)

    def test_links_devices_and_bad_paths_are_refused(self):
        link = tarfile.TarInfo()
        link.type = tarfile.SYMTYPE
        link.linkname = "/etc"
        hard = tarfile.TarInfo()
        hard.type = tarfile.LNKTYPE
        hard.linkname = "main.py"
        device = tarfile.TarInfo()
        device.type = tarfile.CHRTYPE
        for members in ([("main.py", b""), ("l", link)], [("main.py", b""), ("h", hard)],
                        [("main.py", b""), ("d", device)], [("/abs", b""), ("main.py", b"")],
                        [("a/../b", b""), ("main.py", b"")], [("main.py", b""), ("main.py", b"")],
                        [("main.py", b""), (".scs/other", b"")]):
            with self.subTest(members=[name for name, _ in members]), Workspace(bundle):
                with self.assertRaises(Rejected):
                    bundle.unpack(io.BytesIO(tar_bytes(members)))

    def test_the_code_file_is_the_languages(self):
        bundle.require_code({"main.py"}, "python")
        bundle.require_code({"main.sh", "data"}, "bash")
        bundle.require_code({"main.js"}, "javascript")
        for names, language in (({"x"}, "python"), ({"main.py"}, "bash"),
                                ({"main.sh"}, "javascript")):
            with self.subTest(language=language), self.assertRaisesRegex(Rejected, "bundle: no "):
                bundle.require_code(names, language)

    def test_a_cut_archive_is_refused(self):
        data = tar_bytes([("main.py", b"x" * 2000)])
        with Workspace(bundle), self.assertRaises(Rejected):
            bundle.unpack(io.BytesIO(data[:1024]))

    def test_a_sessions_later_run_replaces_files_and_gives_the_owner_back_its_directories(self):
        with Workspace(bundle) as workspace:
            bundle.unpack(io.BytesIO(tar_bytes([("main.py", b"1"), ("d/f", b"old")])))
            os.symlink("/etc/passwd", os.path.join(workspace, "d", "g"))
            os.chmod(os.path.join(workspace, "d"), 0o500)
            os.chmod(workspace, 0o555)
            bundle.unpack(io.BytesIO(tar_bytes([("main.py", b"2"), ("d/f", b"new"),
                                                ("d/g", b"mine")])), replace=True)
            self.assertEqual(open(os.path.join(workspace, "d/f"), "rb").read(), b"new")
            self.assertFalse(os.path.islink(os.path.join(workspace, "d/g")))
            self.assertEqual(open(os.path.join(workspace, "main.py"), "rb").read(), b"2")

    def test_a_directory_where_a_file_goes_is_the_runs_refusal(self):
        with Workspace(bundle) as workspace:
            os.mkdir(os.path.join(workspace, "data.csv"))
            with self.assertRaisesRegex(Rejected, "is a directory"):
                bundle.unpack(io.BytesIO(tar_bytes([("data.csv", b"1"), ("main.py", b"")])),
                              replace=True)

    def test_control_members_are_read_without_writing_anything(self):
        with Workspace(bundle) as workspace:
            data = tar_bytes([("main.py", b"1"), (".scs/control.json", CONTROL)])
            self.assertEqual(bundle.control_members(data), {"control.json": CONTROL})
            self.assertEqual(os.listdir(workspace), [])


class ReservedVariablesTest(unittest.TestCase):
    def test_the_launcher_refuses_the_names_the_server_refuses(self):
        """The server's list (credentials.cc) and PID 1's are one list, typed twice."""
        import re
        from support import DOCKER
        source = os.path.join(os.path.dirname(DOCKER), "core", "src", "egress", "credentials.cc")
        with open(source) as file:
            text = file.read()
        names = re.search(r"kReserved = \{(.*?)\};", text, re.S).group(1)
        prefixes = re.search(r"kPrefixes\[\] = \{(.*?)\};", text, re.S).group(1)
        self.assertEqual(set(re.findall(r'"([^"]+)"', names)), set(bundle.RESERVED_VARIABLES))
        self.assertEqual(set(re.findall(r'"([^"]+)"', prefixes)), set(bundle.RESERVED_PREFIXES))


class ControlTest(unittest.TestCase):
    def test_a_good_control_file_reads(self):
        self.assertEqual(bundle.read_control(CONTROL)["nonce"], "0" * 32)
        self.assertIsNone(bundle.read_control(None))

    def test_malformed_or_hostile_control_files_are_refused(self):
        good = json.loads(CONTROL)
        for bad in (b"[" * 100000, b"not json", b"[]", json.dumps(dict(good, nonce="x")).encode(),
                    json.dumps(dict(good, out_dir="/etc")).encode(),
                    json.dumps(dict(good, max_files=-1)).encode(),
                    json.dumps(dict(good, max_files=True)).encode(),
                    json.dumps(dict(good, watchdog_seconds=0)).encode(),
                    json.dumps(dict(good, result_cap=10)).encode(), b" " * 70000):
            with self.subTest(bad=bad[:40]), self.assertRaises(Rejected):
                bundle.read_control(bad)

    def test_the_brokering_ca_and_placeholders_read_only_in_their_forms(self):
        ca = "-----BEGIN CERTIFICATE-----\nMIIBdz==\n-----END CERTIFICATE-----\n"
        placeholder = "scs-placeholder-" + "0123456789abcdef" * 2
        egress = dict(json.loads(CONTROL), egress="f" * 32)
        good = dict(egress, egress_ca=ca, egress_environment={"GITHUB_TOKEN": placeholder})
        control = bundle.read_control(json.dumps(good).encode())
        self.assertEqual(control["egress_environment"], {"GITHUB_TOKEN": placeholder})
        for bad in (dict(json.loads(CONTROL), egress_ca=ca),  # without an egress nonce
                    dict(egress, egress_ca="-----BEGIN CERTIFICATE-----\n$(rm -rf /)\n"),
                    dict(egress, egress_ca=ca + ca),
                    dict(egress, egress_environment={"LD_preload": placeholder}),
                    dict(egress, egress_environment={"LD_PRELOAD": placeholder}),
                    dict(egress, egress_environment={"HTTPS_PROXY": placeholder}),
                    dict(egress, egress_environment={"TOKEN": "ghp_real"}),
                    dict(egress, egress_environment={"TOKEN": 1}),
                    dict(egress, egress_environment=["TOKEN"])):
            with self.subTest(bad=bad), self.assertRaises(Rejected):
                bundle.read_control(json.dumps(bad).encode())


if __name__ == "__main__":
    unittest.main()
