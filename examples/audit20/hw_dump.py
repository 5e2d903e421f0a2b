"""(1a) rare.halfwidth on a grid, printed with repr (bit-exact): run under two trees and diff."""
import itertools, sys, numpy as np
from ldpql.mechanisms import rare
from ldpql.mechanisms.piecewise import Piecewise
from ldpql.mechanisms.hybrid import Hybrid
from ldpql.mechanisms.square_wave import SquareWave
for cls, eps in itertools.product([Piecewise, Hybrid, SquareWave], [2.0, 4.0, 8.0, 12.0, 16.0, 20.0, 30.0]):
    r = cls(eps)
    for n in (3, 4, 5, 10, 30, 100, 300, 1000):
        if n * r.far_share > rare.FEW:
            continue
        for q in (0.0, 0.13, 0.5, 0.9, 0.995):
            for conf in (0.8, 0.9, 0.95, 0.99):
                print(cls.__name__, eps, n, q, conf, repr(rare.halfwidth(r, n, q, conf)), flush=True)
