# %% succeeded
import numpy as np
import matplotlib
import matplotlib.pyplot as plt
x = np.linspace(0, 10, 200)
# %% succeeded files=sine.png images=1
plt.plot(x, np.sin(x), label="sin")
plt.legend()
plt.savefig("/workspace/out/sine.png", dpi=80)
plt.close()
# %% succeeded files=hist.png,scatter.png images=2
rng = np.random.default_rng(0)
plt.hist(rng.normal(size=1000), bins=30)
plt.savefig("/workspace/out/hist.png", dpi=60)
plt.close()
plt.scatter(rng.random(50), rng.random(50))
plt.savefig("/workspace/out/scatter.png", dpi=60)
plt.close()
# %% succeeded files=chart.svg images=0
plt.plot([1, 2, 3], [3, 1, 2])
plt.savefig("/workspace/out/chart.svg")
plt.close()
# %% succeeded files=
"nothing new in out"
# %% failed exception=ValueError
plt.plot([1, 2, 3], [1, 2])
# %% succeeded files=fixed.png images=1
plt.close("all")
plt.plot([1, 2, 3], [1, 2, 3])
plt.savefig("/workspace/out/fixed.png", dpi=50)
plt.close()
# %% succeeded files=sine.png images=1
plt.plot(x, np.sin(2 * x))
plt.savefig("/workspace/out/sine.png", dpi=50)
plt.close()
# %% succeeded result="'agg'"
matplotlib.get_backend().lower()
