"""tiny_head.py's cases on the parent tree (est ± z·se + step/2, no widening): sim replica with widen off."""
import numpy as np, ldpql
import sim
print(ldpql.__file__)
for mech, eps, x, conf in (("piecewise", 2, [1.0], 0.9), ("piecewise", 3, [0.95], 0.95), ("piecewise", 3, [1.0], 0.95),
                           ("piecewise", 4, [-1.0, 0.9], 0.9), ("piecewise", 3, [1.0, -1.0], 0.9),
                           ("hybrid", 2, [1.0], 0.9), ("hybrid", 2, [0.95], 0.95), ("hybrid", 0.7, [1.0, 0.0], 0.9)):
    r = sim.run(mech, eps, np.array(x), conf, 20000, seed=5, widen=False)
    print(f"{mech} eps={eps} data={x} conf={conf}: coverage {r['coverage']:.3f} (sd {r['sd']:.3f})")
