import numpy as np
from ldpql.mechanisms import rare
from sim import MECH
r = MECH["hybrid"](16.0); n = 100
step = 2 / r.pm.steps
print("P_out", r.pm.outside, "beta", r.beta, "far_share", r.far_share, "duchi C", r.duchi.C)
for q in (0.96, 0.97):
    for d in rare.envelopes(n, q, step):
        qq = rare.error_quantile(r.report_values(), r.output_distribution, d, 0.95)
        print(q, {round(k, 5): v for k, v in d.items()}, qq)
for d in ({0.98: 100}, {0.985: 100}, {0.99: 100}, {0.97: 100}, {0.95: 100}, {0.9: 100}, {0.999: 100}):
    err, mass = rare.error_law(r.report_values(), r.output_distribution, d)
    o = np.argsort(err); e, m = err[o], mass[o]
    big = m > 1e-4
    print(d, "atoms with mass>1e-4:", [(round(a, 4), round(b, 4)) for a, b in zip(e[big], m[big])][:8],
          "q95", rare.error_quantile(r.report_values(), r.output_distribution, d, 0.95))
