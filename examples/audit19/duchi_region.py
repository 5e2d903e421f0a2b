"""ε <= 0.61: Hybrid is Duchi alone (β = 0), so no PM report ever arrives, q̂ is None, extra['far'] is never set and
rare.widen never applies, though λ = n·far_share = n <= 16. Coverage of what is shown instead (est ± z·se with the
plug-in bound C² − est²), sim replica, 20,000 runs; forced hybrid and the planner's duchi; and Hybrid just above ε*."""
import numpy as np
from sim import run
for mech, eps in (("hybrid", 0.5), ("duchi", 0.5), ("hybrid", 0.7), ("hybrid", 1.0)):
    for n in (2, 5, 10, 16):
        for name, x in (("all0", np.zeros(n)), ("all+1", np.ones(n)), ("half±1", np.r_[np.ones(n // 2), -np.ones(n - n // 2)])):
            r = run(mech, eps, x, 0.9, 20000, seed=n)
            print(f"{mech} eps={eps} n={n} {name}: widened in {r['applied']:.2f} of runs, coverage {r['coverage']:.3f} "
                  f"(sd {r['sd']:.3f}) at 90%", flush=True)
