"""What runs inside the program's interpreter: program.py (a run's, main.py as `python3 -I main.py`
runs it), session.py (a session's, every run's code in one namespace), and what both share
(record.py). PID 1 starts them with STUB, which names nothing in __main__."""

# `python3 -I -c STUB ROOT MODULE ARGS...`: ROOT is the directory holding scs_launcher. The stub
# binds no name in __main__, so the user's code starts with the namespace a script would have.
STUB = ("__import__('sys').path.insert(0, __import__('sys').argv[1]); "
        "__import__(__import__('sys').argv[2], fromlist=['main']).main()")
