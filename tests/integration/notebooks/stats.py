# %% succeeded result~"array("
import numpy as np
from scipy import stats
rng = np.random.default_rng(1)
a = rng.normal(10, 2, size=500)
b = a * 3 + rng.normal(0, 1, size=500)
a[:3].round(3)
# %% succeeded result~"slope"
fit = stats.linregress(a, b)
fit
# %% succeeded result~"bytes omitted"
np.set_printoptions(threshold=10**9)
np.arange(100000)
# %% succeeded result="'ok'"
class Loud:
    def __repr__(self):
        return "L" * 10_000_000
class Sly(str):
    def encode(self, *a, **k): return self
    def __len__(self): return 0
class Hostile:
    def __repr__(self):
        return Sly("h" * 10_000_000)
loud, hostile = Loud(), Hostile()
"ok"
# %% succeeded result~"omitted"
loud
# %% succeeded result~"omitted"
hostile
# %% succeeded result="2"
1 + 1
# %% failed exception=TypeError
class BadRepr:
    def __repr__(self):
        return 42
BadRepr()
# %% succeeded result~"pvalue"
stats.ttest_ind(a, b)
# %% failed exception=numpy.linalg.LinAlgError
np.linalg.inv(np.zeros((3, 3)))
# %% succeeded result="(3, 3)"
np.linalg.inv(np.eye(3)).shape
