"""The tiny-n q̂-noise cases of grid_tiny.out, re-run (sim replica, 20,000 runs) on the tree in PYTHONPATH."""
import numpy as np, ldpql
from sim import run
print(ldpql.__file__)
for mech, eps, x, conf in (("piecewise", 2, [1.0], 0.9), ("piecewise", 3, [0.95], 0.95), ("piecewise", 3, [1.0], 0.95),
                           ("piecewise", 4, [-1.0, 0.9], 0.9), ("piecewise", 3, [1.0, -1.0], 0.9),
                           ("hybrid", 2, [1.0], 0.9), ("hybrid", 2, [0.95], 0.95), ("hybrid", 0.7, [1.0, 0.0], 0.9)):
    r = run(mech, eps, np.array(x), conf, 20000, seed=5)
    print(f"{mech} eps={eps} data={x} conf={conf}: coverage {r['coverage']:.3f} (sd {r['sd']:.3f}), widened in {r['applied']:.2f}")
