"""Prints each constant of a module of plain assignments (docker/scs_launcher/protocol.py) as
NAME=VALUE, the value's escapes as Python's unicode_escape writes them: for
tests/unit/launcher_protocol_test.cc, which compares them with the C++ header's."""

import ast
import sys

tree = ast.parse(open(sys.argv[1]).read())
for node in tree.body:
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        value = ast.literal_eval(node.value)
        text = value if isinstance(value, str) else str(value)
        sys.stdout.write(node.targets[0].id + "=" + text.encode("unicode_escape").decode() + "\n")
