# %% succeeded result="[0, 1, 4, 9, 16, 25, 36, 49]"
from multiprocessing import Pool
def square(x):
    return x * x
with Pool(4) as pool:
    squares = pool.map(square, range(8))
squares
# %% succeeded result="[1, 8, 27]"
from concurrent.futures import ProcessPoolExecutor
with ProcessPoolExecutor(2) as executor:
    cubes = list(executor.map(pow, [1, 2, 3], [3, 3, 3]))
cubes
# %% succeeded stdout~"parent goes on"
import os, time
child = os.fork()
if child == 0:
    time.sleep(1)
    raise SystemExit(7)
print("parent goes on")
# %% succeeded stdout~"second cell" timeout=10
time.sleep(2)
print("second cell")
# %% succeeded result="7"
os.waitstatus_to_exitcode(os.waitpid(child, 0)[1])
# %% succeeded stdout~"hello from a subprocess"
import subprocess
print(subprocess.run(["echo", "hello from a subprocess"], capture_output=True, text=True).stdout)
# %% succeeded result="1"
import os
quick = os.fork()
if quick == 0:
    os._exit(0)
time.sleep(0.3)
def zombies():
    me = str(os.getpid())
    count = 0
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                fields = open(f"/proc/{name}/stat").read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            count += fields[0] == "Z" and fields[1] == me
    return count
zombies()
# %% succeeded result="1"
zombies()
# %% succeeded result="0"
os.waitpid(quick, 0)[1]
# %% succeeded result="40"
for _ in range(40):
    if os.fork() == 0:
        os._exit(0)
time.sleep(0.5)
zombies()
# %% succeeded result="0"
zombies()
# %% succeeded result="'done'"
background = subprocess.Popen(["sleep", "1"])
"done"
# %% succeeded result="0"
background.wait()
