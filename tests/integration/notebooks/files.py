# %% succeeded stdout~"hello from stdin" stdin="hello from stdin\n"
import sys
print(sys.stdin.read().strip())
# %% succeeded files=report.json
import json, os
os.makedirs("/workspace/out", exist_ok=True)
json.dump({"rows": 3}, open("/workspace/out/report.json", "w"))
# %% succeeded result="{'rows': 3}"
json.load(open("/workspace/out/report.json"))
# %% succeeded files=
open("/workspace/notes.txt", "w").write("kept between cells")
# %% succeeded result="'kept between cells'"
open("/workspace/notes.txt").read()
# %% succeeded
os.makedirs("/workspace/data.csv", exist_ok=True)
# %% failed exception=IsADirectoryError
open("/workspace/data.csv").read()
# %% succeeded
os.rmdir("/workspace/data.csv")
os.chmod("/workspace", 0o555)
# %% succeeded stdout~"writable again"
os.chmod("/workspace", 0o700)
print("writable again")
# %% succeeded files=deep.txt
path = "/workspace/out/nested"
os.makedirs(path, exist_ok=True)
d = path
for _ in range(300):
    d += "/d"
    os.mkdir(d)
open("/workspace/out/deep.txt", "w").write("top")
# %% succeeded stdout~"still fine"
print("still fine")
