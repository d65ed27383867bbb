"""The languages a run may be in, as the control file's CONTROL_LANGUAGE names them (python when
it names none): the file in /workspace holding each one's code, and the interpreter PID 1 starts
for a run or for a session. Every control of the sandbox (limits, filter, deadline, read-back)
binds each of them alike: PID 1 starts them all through processes.spawn().

python: child/program.py (a run) and child/session.py (a session), started ahead of the code.
bash: `bash main.sh` for a run; for a session, one shell that sources each run's main.sh
(child/session.bash), so its directory, variables, functions and jobs carry over.
javascript: Node.js (the image's official 22 LTS build) running child/runner.js, which runs main.js
in the one global context in V8's REPL mode (through an in-process inspector session: no port),
so a session's runs may declare a name again and await at the top level, and static imports
are rewritten line for line; for a run or for every run of a session."""

import os
import re

from . import channel, protocol
from .rejection import Rejected

PYTHON = protocol.LANGUAGE_PYTHON
BASH = protocol.LANGUAGE_BASH
JAVASCRIPT = protocol.LANGUAGE_JAVASCRIPT

CODE_FILES = {
    PYTHON: protocol.CODE_FILE_PYTHON,
    BASH: protocol.CODE_FILE_BASH,
    JAVASCRIPT: protocol.CODE_FILE_JAVASCRIPT,
}
BASH_PATH = "/usr/bin/bash"
NODE_PATH = "/usr/bin/node"
# V8 sizes its heap from the machine's memory, not the sandbox's: without this a heap that
# outgrows V8's own limit ends in V8's abort (SIGABRT), and one below it in the kernel's OOM
# kill. With V8's limit far above any memory cap, the cap alone ends a program that needs too
# much, so an out-of-memory Node is out_of_memory from the engine's OOM record, as Python is.
NODE_HEAP = "--max-old-space-size=1048576"
WORKSPACE = "/workspace"
PLACEHOLDER = re.compile(r"@([A-Z_]+)@")


def of(control):
    """The language a checked control file names. Raises Rejected for one not known here."""
    language = control.get(protocol.CONTROL_LANGUAGE, PYTHON) if control else PYTHON
    if not isinstance(language, str) or language not in CODE_FILES:
        raise Rejected(f"bundle: unknown language {str(language)[:32]!r}")
    return language


def code_path(language):
    return os.path.join(WORKSPACE, CODE_FILES[language])


def check_interpreter(language):
    """Raises Rejected when this image lacks the language's interpreter (the minimal flavour has
    no Node.js), before anything of the run starts."""
    binary = {BASH: BASH_PATH, JAVASCRIPT: NODE_PATH}.get(language)
    if binary is not None and not os.access(binary, os.X_OK):
        raise Rejected(f"{language} is not installed in this sandbox image ({binary} is missing);"
                       " the scientific flavour has it")


def runner(root):
    return os.path.join(root, "scs_launcher", "child", "runner.js")


def run_argv(language, root, report_fd):
    """A one-shot run's interpreter of bash or javascript (python's starts ahead of the code,
    in oneshot.py): its argv and the descriptors it keeps. It runs the code file and exits with
    the program's exit code; javascript's writes its result and uncaught exception to
    `report_fd`, as lines of JSON. bash's never gets `report_fd`, so that no shell command can
    write an exception record for its run."""
    if language == BASH:
        return [BASH_PATH, code_path(BASH)], []
    return [NODE_PATH, NODE_HEAP, runner(root), "run", str(report_fd)], [report_fd]


def session_argv(language, root):
    """A session's interpreter of bash or javascript. It reads channel.command_line()'s line for
    each run from channel.COMMAND_FD and answers on channel.ANSWER_FD (the channel, as
    child/session.py does), in the channel's words, which it is given here."""
    if language == BASH:
        # $0 of the code is "main.sh", as a script's would be.
        return [BASH_PATH, "--norc", "--noprofile", "-c", session_bash(root), CODE_FILES[BASH]]
    return [NODE_PATH, NODE_HEAP, runner(root), "session", channel.MORE.decode("ascii"),
            channel.LAST.decode("ascii"), str(channel.PIECE_BYTES)]


def session_bash(root):
    """child/session.bash's text with each @NAME@ in it replaced by channel.NAME (bytes as
    ASCII, numbers in decimal). Raises ValueError for a name the channel does not have: a shell
    never starts with a placeholder in its text."""

    def word(match):
        value = getattr(channel, match.group(1), None)
        if isinstance(value, bytes):
            return value.decode("ascii")
        if isinstance(value, int):
            return str(value)
        raise ValueError(f"session.bash: {match.group(0)} is no word of the channel")

    with open(os.path.join(root, "scs_launcher", "child", "session.bash"), "r") as driver:
        return PLACEHOLDER.sub(word, driver.read())
