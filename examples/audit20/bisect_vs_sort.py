"""(1a) Is the bisection quantile bit-identical to the old sort-based one (0439834)? Same error_law arrays; the old
quantile re-implemented verbatim. Adversarial laws: symmetric envelopes (float ties ±t), huge ε (dyadic masses, cover
exactly = confidence), confidences 0.5/0.75/0.875 (dyadic), random few-atom sets, Hybrid (off-lattice values)."""
import itertools, sys, time, numpy as np
from ldpql.mechanisms import rare
from ldpql.mechanisms.piecewise import Piecewise
from ldpql.mechanisms.hybrid import Hybrid
from ldpql.mechanisms.square_wave import SquareWave

def old_quantile(values, law, data, confidence):
    error, mass = rare.error_law(values, law, data)
    order = np.argsort(np.abs(error))
    cum = np.cumsum(mass[order])
    return float(np.abs(error[order][min(np.searchsorted(cum, confidence), len(cum) - 1)]))

rng = np.random.default_rng(20)
t0 = time.time()
total = diff = 0
worst = []
for cls, eps in itertools.product([Piecewise, Hybrid, SquareWave], [8.0, 16.0, 20.0, 30.0]):
    r = cls(eps)
    values, law = r.report_values(), r.output_distribution
    step = 2 / getattr(r, "pm", r).steps
    for n in (1, 2, 3, 5, 10, 30):
        if n * r.far_share > rare.FEW:
            continue
        sets = [dict(d) for d in {tuple(sorted(d.items())) for b in (0.0, 0.25, 0.5, 0.99)
                                  for d in rare.envelopes(n, (b, b + 0.01), step)}]
        for _ in range(3):   # random few-atom sets, some on grid points and at exact 0
            k = int(rng.integers(1, 4))
            xs = rng.choice(np.r_[np.linspace(-1, 1, 21), rng.uniform(-1, 1, 5)], k)
            cnt = rng.multinomial(n, np.ones(k) / k)
            d = {}
            for x, c in zip(xs, cnt):
                if c:
                    d[float(x)] = d.get(float(x), 0) + int(c)
            sets.append(d)
        for d in sets:
            for conf in (0.5, 0.75, 0.8, 0.875, 0.9, 0.95, 0.99):
                a = rare.error_quantile(values, law, d, conf, {})
                b = old_quantile(values, law, d, conf)
                total += 1
                if a != b:
                    diff += 1
                    worst.append((abs(a - b) / max(abs(b), 1e-300), cls.__name__, eps, n, conf, d, a, b))
    print(f"{cls.__name__} eps={eps}: {total} compared so far, {diff} differ [{time.time()-t0:.0f}s]", flush=True)
print(f"{total} quantiles compared, {diff} differ (bisection vs sort) [{time.time()-t0:.0f}s]")
for w in sorted(worst, key=lambda w: -w[0])[:25]:
    print("rel %.3g %s eps=%g n=%d conf=%g data=%s bisect=%r sort=%r" % w)
