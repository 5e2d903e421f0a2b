import numpy as np
from ldpql.mechanisms import rare
from sim import MECH, exact_cov, run
def strict(mech, eps, data, conf, q=None):
    r = MECH[mech](eps); n = sum(data.values())
    if q is None: q = sum(x*x*c for x, c in data.items())/n
    half = rare.halfwidth(r, n, q, conf)
    err, mass = rare.error_law(r.report_values(), r.output_distribution, data)
    a = np.abs(err)/n
    return half, float(mass[a <= half*(1+1e-9)].sum()), float(mass[a < half*(1-1e-9)].sum())
for case in [("piecewise",30,{0.0:10},0.9), ("piecewise",12,{0.0:2},0.9), ("hybrid",16,{0.0:30},0.9),
             ("hybrid",16,{0.98:100},0.95), ("hybrid",16,{0.98:100},0.9), ("piecewise",4,{1.0:1,-1.0:1},0.9),
             ("hybrid",12,{0.98:30},0.9)]:
    print(case, "half, cov(<=), cov(<):", strict(*case))
    for qq in (0.96, 0.97, 0.98, 1.0):
        if case[2] == {0.98:100} or case[2]=={0.98:30}: print("   at q", qq, strict(*case, q=qq))
