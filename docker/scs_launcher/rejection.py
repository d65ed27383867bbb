"""How PID 1 refuses: `Rejected` where the caller decides what a refusal costs (a session's run
whose files cannot be placed), reject() where nothing may run at all."""

import os
import sys

from . import protocol


class Rejected(Exception):
    """What the launcher will not do, in words for the run's report."""


def reject(why):
    """Ends the sandbox before any code runs: "sandbox launcher: rejected <why>" on stderr, and
    exit code protocol.REJECTED_EXIT, which the server reports as the sandbox's failure."""
    try:
        sys.stderr.write(f"sandbox launcher: rejected {why}\n")
        sys.stderr.flush()
    finally:
        os._exit(protocol.REJECTED_EXIT)
