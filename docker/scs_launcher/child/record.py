"""The uncaught exception of the user's code, as both interpreters report it: its traceback cut
to the code's own frames and printed as Python prints it, and its record {type, message,
traceback}, valid UTF-8, each text capped (the traceback's end kept).

Every builtin and method used here is taken when this module loads, before any user code: the
code may rebind any name of __main__ (a notebook's `type = 'sales'`, `str = 'x'`) or define
objects whose methods lie (a str subclass whose encode() returns itself), and neither may change
what is reported or break the reporting."""

import sys
import traceback

_type = type
_str = str
_isinstance = isinstance
_len = len
_exact = str.__str__  # the value of a str (of any subclass) as a plain str
_encode = str.encode
_decode = bytes.decode
_join = str.join

MAX_TEXT_BYTES = 8192


def plain(value):
    """`value`, a str of any subclass, as a plain str that is valid UTF-8."""
    return _decode(_encode(_exact(value), "utf-8", "replace"), "utf-8")


def utf8_bytes(text):
    return _encode(text, "utf-8")


def head(text, cap):
    """At most `cap` bytes of `text` (a plain str), from its start."""
    data = _encode(text, "utf-8")
    return text if _len(data) <= cap else _decode(data[:cap], "utf-8", "ignore")


def tail(text, cap):
    """At most `cap` bytes of `text`, from its end, marked "[...]" when cut."""
    data = _encode(text, "utf-8")
    if _len(data) <= cap:
        return text
    return "[...]\n" + _decode(data[-(cap - 6):], "utf-8", "ignore")


def _name(kind):
    name = plain(kind.__qualname__)
    module = kind.__module__
    if _isinstance(module, _str):
        module = plain(module)
        if module not in ("builtins", "__main__"):
            name = module + "." + name
    return name


def uncaught(error, path):
    """Prints `error` as an uncaught exception of the code in `path` and returns its record."""
    try:
        tb = error.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != path:
            tb = tb.tb_next
        error.__traceback__ = tb
    except BaseException:
        tb = None
    kind = _type(error)
    try:
        sys.excepthook(kind, error, tb)
    except BaseException:
        try:
            sys.__excepthook__(kind, error, tb)
        except BaseException:
            pass
    try:
        name = _name(kind)
    except BaseException:
        name = "<unknown exception type>"
    try:
        message = head(plain(_str(error)), MAX_TEXT_BYTES)
    except BaseException:
        message = "<unprintable " + name + " object>"
    try:
        text = tail(plain(_join("", traceback.format_exception(kind, error, tb))),
                    MAX_TEXT_BYTES)
    except BaseException:
        text = name + ": " + message + "\n"
    return {"type": name, "message": message, "traceback": text}
