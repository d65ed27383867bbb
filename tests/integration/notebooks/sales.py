# %% succeeded stdout~"wrote 120 rows"
import csv, random
random.seed(7)
regions = ["north", "south", "east", "west"]
with open("sales.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["month", "region", "units", "price"])
    for month in range(1, 31):
        for region in regions:
            w.writerow([month, region, random.randint(5, 50), round(random.uniform(2, 9), 2)])
print("wrote", 30 * len(regions), "rows")
# %% succeeded result="(120, 4)"
import pandas as pd
df = pd.read_csv("sales.csv")
df.shape
# %% succeeded
type = "sales"
id = 42
# %% failed exception=ZeroDivisionError stderr~"ZeroDivisionError"
revenue_per_unit = df.units.sum() / 0
1 / 0
# %% succeeded result~"north"
df["revenue"] = df.units * df.price
by_region = df.groupby("region").revenue.sum().round(2)
by_region
# %% failed exception=KeyError
df["profit"].mean()
# %% succeeded result~"revenue"
df.columns.tolist()
# %% succeeded stdout~"type is sales"
print("type is", type, "and id is", id)
# %% succeeded files=by_region.png images=1
import matplotlib.pyplot as plt
ax = by_region.plot.bar(title="Revenue by region")
plt.tight_layout()
plt.savefig("/workspace/out/by_region.png")
plt.close()
# %% succeeded result~"count"
df.describe().round(1)
# %% succeeded result="4"
len(df.region.unique())
