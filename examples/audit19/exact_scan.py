"""Search 2 (exact law, no q̂ noise): coverage of rare.halfwidth at the data's TRUE E[x²] (rounded up to 0.01 as the
code does) over point masses, two-atom and random few-atom data sets. Reports cov_le (atoms at the boundary counted,
with the unit tests' 1e-9 tolerance) and cov_lt (boundary atoms not counted: what float ties give in the worst case)."""
import itertools, sys, time
import numpy as np
from ldpql.mechanisms import rare
from sim import MECH

def cover(r, data, conf):
    n = sum(data.values())
    q = sum(x * x * c for x, c in data.items()) / n
    half = rare.halfwidth(r, n, q, conf)
    if not half:
        return None
    err, mass = rare.error_law(r.report_values(), r.output_distribution, data)
    a = np.abs(err) / n
    return half, float(mass[a <= half * (1 + 1e-9)].sum()), float(mass[a < half * (1 - 1e-9)].sum())

def families(n, rng):
    for x in np.round(np.linspace(0, 1, 101), 4):
        yield f"pt {x}", {float(x): n}
    for x in (0.5, 0.8, 0.9, 0.95, 0.98, 1.0):
        for s in (0.1, 0.3, 0.5):
            k = max(1, int(round(s * n)))
            if k < n:
                yield f"±{x} {s}", {x: k, -x: n - k}
    for x in (0.9, 0.98, 1.0):
        for y in (0.0, 0.5, -0.5, 0.8):
            for s in (0.02, 0.1, 0.3, 0.6):
                k = max(1, int(round(s * n)))
                if k < n:
                    yield f"{x}@{s}+{y}", {x: k, y: n - k}
    for i in range(30):
        m = rng.integers(2, 5)
        xs = np.round(np.where(rng.random(m) < 0.5, rng.choice([-1, 1], m) * (1 - rng.exponential(0.03, m)),
                               rng.uniform(-1, 1, m)), 4)
        w = rng.dirichlet(np.ones(m)) * n
        c = np.maximum(1, np.round(w)).astype(int)
        c[-1] = max(1, n - c[:-1].sum())
        d = {}
        for x, k in zip(xs, c):
            d[float(np.clip(x, -1, 1))] = d.get(float(np.clip(x, -1, 1)), 0) + int(k)
        yield f"rand{i}", d

rng = np.random.default_rng(11)
mechs = sys.argv[1].split(",") if len(sys.argv) > 1 else ["piecewise", "hybrid"]
epss = [float(e) for e in sys.argv[2].split(",")] if len(sys.argv) > 2 else [8, 10, 12, 14, 16, 18, 20]
ns = [int(v) for v in sys.argv[3].split(",")] if len(sys.argv) > 3 else [10, 30, 100, 300, 1000, 3000]
t0 = time.time()
print("mech eps n conf lam data half cov_le cov_lt")
for mech, eps, n in itertools.product(mechs, epss, ns):
    r = MECH[mech](eps)
    lam = n * r.far_share
    if lam > rare.FEW:
        continue
    for conf in (0.9, 0.95):
        worst = []
        for name, d in families(n, rng):
            c = cover(r, d, conf)
            if c is None:
                continue
            worst.append((c[1], c[2], name, c[0]))
            if c[1] < conf - 0.02:
                print(f"{mech} {eps:g} {n} {conf} {lam:.3g} {name} {c[0]:.4g} {c[1]:.4f} {c[2]:.4f} <<<", flush=True)
        worst.sort()
        lt = min(worst, key=lambda w: w[1])
        print(f"SUMMARY {mech} {eps:g} {n} {conf} lam={lam:.3g} min_le={worst[0][0]:.4f} ({worst[0][2]}) "
              f"min_lt={lt[1]:.4f} ({lt[2]}) datasets={len(worst)} t={time.time()-t0:.0f}s", flush=True)
