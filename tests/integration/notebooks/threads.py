# %% succeeded
import threading, time, sys
stop = threading.Event()
def chatter():
    time.sleep(1.5)
    while not stop.is_set():
        print("background " * 20)
        time.sleep(0.001)
threading.Thread(target=chatter, daemon=True).start()
# %% failed stdout~"" timeout=5
import sys
sys.exit(3)
# %% succeeded result="'after'"
time.sleep(2)
"after"
# %% succeeded result="45"
import queue
q = queue.Queue()
def worker():
    for i in range(10):
        q.put(i)
t = threading.Thread(target=worker)
t.start(); t.join()
sum(q.get() for _ in range(10))
# %% succeeded
stop.set()
time.sleep(0.1)
# %% succeeded stdout~"quiet now"
print("quiet now")
# %% timed_out timeout=2 stderr~"KeyboardInterrupt"
while True:
    time.sleep(0.05)
# %% succeeded result="'interrupted and back'"
"interrupted and back"
# %% failed exception=RuntimeError stderr~"from a thread"
errors = []
def fails():
    try:
        raise RuntimeError("from a thread")
    except RuntimeError as e:
        errors.append(e)
th = threading.Thread(target=fails); th.start(); th.join()
raise errors[0]
