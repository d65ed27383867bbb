"""`--no-network` (a Pod's eth0 that only a NetworkPolicy may cut): the flag, the environment PID 1
leaves its programs, the program's seccomp filter, in a child PID 1's own spawn() starts, and
what the audit's network rows make of it."""

import json
import os
import subprocess
import unittest
from unittest import mock

from support import Workspace
import audit_process
from scs_launcher import arguments, pid1, processes, program_filter

# Run by the child: the outcome of each call its arguments name, "OK" or its errno's name, as
# one line of JSON.
PROBE = r"""
import ctypes, errno, json, os, socket, sys

SYS_SOCKET = {"x86_64": 41, "aarch64": 198}[os.uname().machine]
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


def outcome(call):
    try:
        for sock in call():
            sock.close()
        return "OK"
    except OSError as error:
        return errno.errorcode[error.errno]


def raw_socket(family, kind):
    # A family with bits above the low 32, which Python's socket module will not pass.
    ctypes.set_errno(0)
    fd = libc.syscall(ctypes.c_long(SYS_SOCKET), ctypes.c_long(family), ctypes.c_long(kind),
                      ctypes.c_long(0))
    if fd < 0:
        return errno.errorcode[ctypes.get_errno()]
    os.close(fd)
    return "OK"


calls = {
    "AF_INET": lambda: outcome(lambda: [socket.socket(socket.AF_INET, socket.SOCK_STREAM)]),
    "AF_INET6": lambda: outcome(lambda: [socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)]),
    "AF_NETLINK": lambda: outcome(lambda: [socket.socket(socket.AF_NETLINK, socket.SOCK_RAW)]),
    "AF_PACKET": lambda: outcome(lambda: [socket.socket(socket.AF_PACKET, socket.SOCK_RAW)]),
    "AF_INET high bits": lambda: raw_socket(socket.AF_INET | 1 << 32, socket.SOCK_STREAM),
    "AF_UNIX": lambda: outcome(lambda: [socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)]),
    "AF_UNIX pair": lambda: outcome(lambda: socket.socketpair(socket.AF_UNIX,
                                                              socket.SOCK_STREAM)),
    "AF_TIPC pair": lambda: outcome(lambda: socket.socketpair(socket.AF_TIPC,
                                                              socket.SOCK_SEQPACKET)),
}
print(json.dumps({name: calls[name]() for name in sys.argv[1:]}), flush=True)
"""


def probe(no_network, *calls):
    """The outcomes of PROBE's `calls` in a child of processes.spawn(), with
    program_filter.NO_NETWORK set as pid1.main() sets it."""
    read, write = os.pipe()
    saved = program_filter.NO_NETWORK
    program_filter.NO_NETWORK = no_network
    try:
        with Workspace(processes):
            pid = processes.spawn([processes.PYTHON, "-I", "-c", PROBE, *calls],
                                  stdout_fd=write)
            os.close(write)
            with os.fdopen(read) as output:
                text = output.read()
            _, status = os.waitpid(pid, 0)
    finally:
        program_filter.NO_NETWORK = saved
    if os.waitstatus_to_exitcode(status) != 0:
        raise AssertionError(f"the probe failed: {text!r}")
    return json.loads(text)


class FlagTest(unittest.TestCase):
    def test_the_switch_takes_no_value_and_is_off_unless_given(self):
        given = arguments.parse(["--no-network", "--deadline", "9", "--session"])
        self.assertTrue(given.no_network)
        self.assertEqual(given.deadline, 9)
        self.assertTrue(given.session)
        self.assertFalse(arguments.parse(["--deadline", "9"]).no_network)


class EnvironmentTest(unittest.TestCase):
    def test_the_kubelets_variables_are_gone_from_what_a_program_inherits(self):
        injected = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443",
                    "KUBERNETES_PORT_443_TCP": "tcp://10.96.0.1:443", "NOT_KUBERNETES_X": "kept",
                    "KUBERNETES": "kept"}
        with mock.patch.dict(os.environ, injected):
            pid1.drop_kubernetes_variables()
            seen = subprocess.run(["/usr/bin/env"], capture_output=True, text=True,
                                  check=True).stdout.splitlines()
        self.assertFalse([line for line in seen if line.startswith("KUBERNETES_")], seen)
        self.assertIn("NOT_KUBERNETES_X=kept", seen)
        self.assertIn("KUBERNETES=kept", seen)


class FilterTest(unittest.TestCase):
    def test_with_the_flag_only_unix_sockets_are_made(self):
        refused = ("AF_INET", "AF_INET6", "AF_NETLINK", "AF_PACKET", "AF_INET high bits",
                   "AF_TIPC pair")
        outcomes = probe(True, *refused, "AF_UNIX", "AF_UNIX pair")
        for call in refused:
            self.assertEqual(outcomes[call], "EACCES", call)
        self.assertEqual(outcomes["AF_UNIX"], "OK")
        self.assertEqual(outcomes["AF_UNIX pair"], "OK")

    def test_without_it_an_ip_socket_opens(self):
        # Only calls that change nothing on this machine (no AF_TIPC pair, which may load the
        # tipc module into the host's kernel).
        outcomes = probe(False, "AF_INET", "AF_INET high bits", "AF_UNIX pair")
        self.assertEqual(outcomes["AF_INET"], "OK")
        # The kernel reads only the family's low 32 bits: this is AF_INET too.
        self.assertEqual(outcomes["AF_INET high bits"], "OK")
        self.assertEqual(outcomes["AF_UNIX pair"], "OK")


class AuditRows:
    """What the audit's checks read and write (docker/audit.py's Audit), the rows kept."""

    def __init__(self, config):
        self.config = config
        self.expect = {"socket_errno": {"AF_VSOCK": {"EPERM"}, "AF_PACKET": {"EPERM"},
                                        "AF_ALG": {"EPERM"}}}
        self.rows = {}

    def report(self, name, ok, expected, observed, detail=""):
        self.rows[name] = [ok, observed]


def audited(config, *checks):
    """The rows of `checks` in a child that installed the program's filter with --no-network:
    every socket the checks try is refused before it reaches a network."""

    def run():
        program_filter.install_seccomp_filter(no_network=True)
        rows = AuditRows(config)
        for check in checks:
            check(rows)
        return json.dumps(rows.rows)

    answer = audit_process.in_child(run)
    try:
        return json.loads(answer)
    except ValueError:
        raise AssertionError(f"the checks failed: {answer}") from None


class AuditTest(unittest.TestCase):
    def test_the_refusal_holds_in_place_of_only_lo_and_egress_is_refused_at_once(self):
        rows = audited({"ip_sockets_refused": True}, audit_process.check_network,
                       audit_process.check_socket_families)
        self.assertNotIn("network_interfaces", rows)
        self.assertEqual(rows["ip_sockets_refused"],
                         [True, "AF_INET EACCES, AF_INET6 EACCES, AF_NETLINK EACCES, "
                                "AF_PACKET EACCES"])
        for row in ("tcp4_egress", "tcp6_egress", "socket AF_VSOCK", "socket AF_PACKET",
                    "socket AF_ALG"):
            self.assertEqual(rows[row], [True, "EACCES"], row)

    def test_without_the_key_a_family_refused_with_eacces_fails(self):
        rows = audited({}, audit_process.check_socket_families)
        self.assertEqual(rows["socket AF_PACKET"], [False, "EACCES"])


if __name__ == "__main__":
    unittest.main()
