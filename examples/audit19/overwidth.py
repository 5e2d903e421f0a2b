"""Over-width where the rule applies, and the jump at λ = FEW: exact law at the true q (no q̂ noise).
ratio = rare half-width / the data's own confidence-quantile of |error| (the narrowest exact interval for that data
set centred at the estimate); zse = z·se at the true q (the interval it replaced)."""
import math, numpy as np
from statistics import NormalDist
from ldpql.mechanisms import rare
from sim import MECH

def data_sets(n, rng):
    u = np.round(rng.uniform(-1, 1, n), 4)
    b = np.round(np.r_[rng.normal(-0.6, 0.1, n // 2), rng.normal(0.6, 0.1, n - n // 2)].clip(-1, 1), 4)
    s = np.round((1 - 2 * rng.beta(0.5, 4, n)), 4)   # skewed toward +1
    out = {"uniform": u, "bimodal": b, "skew+1": s}
    return {k: dict(zip(*np.unique(v, return_counts=True))) for k, v in out.items()}

def quant(r, d, conf):
    return rare.error_quantile(r.report_values(), r.output_distribution, {float(k): int(c) for k, c in d.items()}, conf)

rng = np.random.default_rng(3)
print("mech eps n lam conf data half/oracle half/zse coverage")
for mech, eps, n in [("piecewise", 16, 1000), ("piecewise", 20, 100), ("piecewise", 20, 1000), ("piecewise", 12, 300),
                     ("hybrid", 16, 1000), ("hybrid", 12, 300), ("piecewise", 8, 300), ("hybrid", 10, 1000)]:
    r = MECH[mech](eps)
    for name, d in data_sets(n, rng).items():
        if n * r.far_share > rare.FEW:
            continue
        q = sum(float(k) ** 2 * c for k, c in d.items()) / n
        for conf in (0.9, 0.95):
            half = rare.halfwidth(r, n, q, conf)
            oracle = quant(r, d, conf) / n
            z = NormalDist().inv_cdf(0.5 + conf / 2)
            zse = z * math.sqrt(float(r.variance(np.zeros(1), n, second_moment=q)[0]))
            err, mass = rare.error_law(r.report_values(), r.output_distribution, {float(k): int(c) for k, c in d.items()})
            cov = float(mass[np.abs(err) / n <= half * (1 + 1e-9)].sum())
            print(f"{mech} {eps} {n} {n*r.far_share:.3g} {conf} {name} {half/oracle:.2f} {half/zse:.2f} {cov:.3f}", flush=True)

print("\njump at λ = FEW (uniform data, true q = 1/3): half-width just inside vs z·se just outside")
for mech in ("piecewise", "hybrid"):
    for eps in (6, 8, 10, 12):
        r = MECH[mech](eps)
        n0 = int(rare.FEW / r.far_share)   # largest n with λ <= FEW
        for conf in (0.9, 0.95):
            z = NormalDist().inv_cdf(0.5 + conf / 2)
            h_in = rare.halfwidth(r, n0, 1 / 3, conf)
            zse_out = z * math.sqrt(float(r.variance(np.zeros(1), n0 + 1, second_moment=1 / 3)[0]))
            print(f"{mech} eps={eps} n={n0} (λ={n0*r.far_share:.2f}) conf={conf}: rare {h_in:.4g}; n={n0+1} z·se {zse_out:.4g}; "
                  f"ratio {h_in/zse_out:.3f}; halfwidth(n0+1)={rare.halfwidth(r, n0 + 1, 1/3, conf)}", flush=True)
