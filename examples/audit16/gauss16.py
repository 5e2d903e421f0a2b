"""Audit 16, part 4: the batched gaussian_check.log_likelihood (63f8643) against the version before it (5e2f80c,
read from git at run time: `git show 5e2f80c:ldpql/mechanisms/gaussian_check.py`).

Fuzz: random report lists mixing class counts r in {2, 3, 4, 7}, shifts and widths of mixed magnitude, σ drawn at and
around the branch boundaries width/2 and 6·width (exactly, and one ulp either side), scalar / 1-D / 2-D broadcast µ, σ;
plus extreme |µ − shift| / σ, zero counts, empty list, single report. Then end to end: check_sigma, profile_estimate,
goodness_of_fit on the same reports under both modules.

    nice python gauss16.py [cases]   -> gauss16.txt
"""
from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path

import numpy as np

import ldpql.mechanisms.gaussian_check as new


def _old_module() -> types.ModuleType:
    """The gaussian check as it was at 5e2f80c (before the batching), from the repository's history."""
    source = subprocess.run(["git", "show", "5e2f80c:ldpql/mechanisms/gaussian_check.py"], capture_output=True,
                            text=True, check=True, cwd=Path(__file__).parent).stdout
    module = types.ModuleType("gaussian_check_old")
    exec(compile(source, "gaussian_check_old.py", "exec"), module.__dict__)
    return module


old = _old_module()

HERE = Path(__file__).parent
out_lines = []


def say(s):
    print(s, flush=True)
    out_lines.append(s)


def rel(a, b):
    a, b = np.asarray(a, float), np.asarray(b, float)
    both_nan = np.isnan(a) & np.isnan(b)
    same_inf = np.isinf(a) & np.isinf(b) & (np.sign(a) == np.sign(b))
    d = np.abs(a - b) / np.maximum(np.maximum(np.abs(a), np.abs(b)), 1e-300)
    d = np.where(both_nan | same_inf, 0.0, d)
    d = np.where(np.isnan(a) ^ np.isnan(b), np.inf, d)
    return float(np.max(d)) if d.size else 0.0


def reports(rng, k):
    out = []
    for _ in range(k):
        r = int(rng.choice([2, 3, 4, 7]))
        width = float(2.0 ** rng.integers(-6, 12)) if rng.random() < 0.7 else float(rng.uniform(0.01, 500))
        shift = 0.0 if rng.random() < 0.4 else float(rng.normal(0, 10 * width))
        counts = rng.integers(0, 5000, r).astype(float)
        if rng.random() < 0.2:
            counts[rng.integers(0, r)] = 0
        e = float(rng.uniform(0.2, 6))
        p = np.exp(e) / (np.exp(e) + r - 1)
        q = 1 / (np.exp(e) + r - 1)
        out.append(new.Cells(counts, shift, width, p, q))
    return out


def sigmas_at_boundaries(rng, reps, size):
    w = np.array([c.width for c in reps])
    base = rng.choice(np.concatenate([w / 2, 6 * w]), size)
    kind = rng.integers(0, 4, size)
    s = np.where(kind == 0, base, np.where(kind == 1, np.nextafter(base, 0), np.where(kind == 2, np.nextafter(base, np.inf),
                                                                                     base * rng.uniform(0.1, 10, size))))
    return s


def fuzz(cases):
    rng = np.random.default_rng(1616)
    worst = (0.0, None)
    worst_abs = 0.0
    for t in range(cases):
        reps = reports(rng, int(rng.integers(1, 9)))
        centre = float(np.mean([c.shift for c in reps]))
        shape_kind = t % 5
        if shape_kind == 0:     # scalar µ, scalar σ
            mu = float(centre + rng.normal(0, 50)); sg = float(sigmas_at_boundaries(rng, reps, 1)[0])
        elif shape_kind == 1:   # 1-D µ, scalar σ
            mu = centre + rng.normal(0, 50, 17); sg = float(sigmas_at_boundaries(rng, reps, 1)[0])
        elif shape_kind == 2:   # scalar µ, 1-D σ
            mu = float(centre + rng.normal(0, 50)); sg = sigmas_at_boundaries(rng, reps, 23)
        elif shape_kind == 3:   # (1, M) x (S, 1) grid as _grid does
            mu = (centre + rng.normal(0, 50, 11))[None, :]; sg = sigmas_at_boundaries(rng, reps, 7)[:, None]
        else:                   # 2-D µ against 1-D σ broadcast
            mu = centre + rng.normal(0, 50, (5, 6)); sg = sigmas_at_boundaries(rng, reps, 6)
        a = old.log_likelihood(reps, mu, sg)
        b = new.log_likelihood(reps, mu, sg)
        assert np.shape(a) == np.shape(b), (np.shape(a), np.shape(b))
        d = rel(a, b)
        worst_abs = max(worst_abs, float(np.nanmax(np.abs(np.asarray(a) - np.asarray(b)))))
        if d > worst[0]:
            worst = (d, t)
    say(f"fuzz: {cases} random cases (r in 2,3,4,7 mixed; σ at width/2 and 6·width exactly and ±1 ulp; 5 broadcast "
        f"shapes): max relative difference {worst[0]:.3g} (case {worst[1]}), max absolute {worst_abs:.3g}")


def class_probs_boundary():
    """class_probabilities itself (the new signature with scalar shift/width must equal the old)."""
    worst = 0.0
    for width in (1e-3, 0.5, 1.0, 3.0, 2.0 ** 20):
        for r in (2, 4, 7):
            for s in (width / 2, np.nextafter(width / 2, 0), np.nextafter(width / 2, 1e300), 6 * width,
                      np.nextafter(6 * width, 0), np.nextafter(6 * width, 1e300)):
                mu = np.linspace(-40 * width, 40 * width, 101)
                a = old.class_probabilities(mu, s, 0.3 * width, width, r)
                b = new.class_probabilities(mu, s, 0.3 * width, width, r)
                worst = max(worst, float(np.max(np.abs(a - b))))
    say(f"class_probabilities at the branch boundaries (σ = width/2, 6·width, ±1 ulp; 5 widths, r = 2,4,7): "
        f"max |old − new| {worst:.3g}")


def extremes():
    rows = []
    for mu_off, sd, w in ((1e6, 1e-3, 1.0), (1e8, 1e-6, 1.0), (1e10, 1e-3, 1.0), (1e12, 1e-4, 1.0), (3e5, 0.3, 1.0),
                          (1e15, 0.4, 1.0), (-1e9, 0.2, 1.0), (1e6, 2.0, 1.0), (1e12, 2.0, 1.0), (1e15, 3.0, 1.0)):
        c = new.Cells(np.array([300.0, 200.0, 100.0, 400.0]), 0.0, w, 0.6, 0.4 / 3)
        a = old.log_likelihood([c], mu_off + np.linspace(0, 1, 9), sd)
        b = new.log_likelihood([c], mu_off + np.linspace(0, 1, 9), sd)
        pa_ = old.class_probabilities(mu_off + np.linspace(0, 1, 9), sd, 0.0, w, 4)
        pb_ = new.class_probabilities(mu_off + np.linspace(0, 1, 9), sd, 0.0, w, 4)
        rows.append(f"  |µ−shift| = {mu_off:g}, σ = {sd:g}, width {w:g}: max |Δℓ| {np.max(np.abs(a - b)):.3g} "
                    f"(rel {rel(a, b):.3g}); max |Δπ| {np.max(np.abs(pa_ - pb_)):.3g}; old π row sums "
                    f"{np.ptp(pa_.sum(1)):.2g} spread, new {np.ptp(pb_.sum(1)):.2g}")
    say("extreme |µ − shift| / σ (µ far from the partition's origin; the near branch's 12-edge form divides first):")
    for r in rows:
        say(r)


def degenerate():
    c = new.Cells(np.array([0.0, 0.0]), 1.0, 2.0, 0.7, 0.3)
    cases = {"empty list": ([], 0.0, 1.0), "all-zero counts": ([c], np.array([0.0, 1.0]), 1.0),
             "σ = 0": ([c], 1.0, 0.0), "µ = inf": ([c], np.inf, 1.0), "µ = nan": ([c], np.nan, 1.0),
             "σ = inf": ([c], 1.0, np.inf), "0-length µ": ([c], np.zeros(0), 1.0),
             "width = inf": ([new.Cells(np.array([5.0, 3.0]), 0.0, np.inf, 0.7, 0.3)], 1.0, 1.0)}
    for name, (reps, mu, sg) in cases.items():
        res = []
        for mod in (old, new):
            try:
                with np.errstate(all="ignore"):
                    res.append(np.asarray(mod.log_likelihood(reps, mu, sg)))
            except Exception as e:  # noqa: BLE001
                res.append(f"{type(e).__name__}: {e}")
        same = (isinstance(res[0], str) and res[0] == res[1]) or (
            not isinstance(res[0], str) and not isinstance(res[1], str) and res[0].shape == res[1].shape
            and rel(res[0], res[1]) <= 1e-13)
        say(f"  {name}: old {res[0]!r}, new {res[1]!r} -> {'same' if same else 'DIFFERENT'}")


def end_to_end(k):
    rng = np.random.default_rng(1617)
    worst = {"check_sigma": 0.0, "profile": 0.0, "gof": 0.0}
    flips = 0
    for t in range(k):
        # round-1-like level reports (r = 4 at widths 2^j) plus KVRR2-like binary reports (r = 2), from N(µ, σ) data
        mu, sd = rng.uniform(50, 500), 2.0 ** rng.uniform(-1, 6)
        x = rng.normal(mu, sd, 4000)
        e = rng.uniform(0.5, 4)
        p4, q4 = np.exp(e) / (np.exp(e) + 3), 1 / (np.exp(e) + 3)
        p2, q2 = np.exp(e) / (np.exp(e) + 1), 1 / (np.exp(e) + 1)
        reps = []
        for j in range(0, 9):
            cls = (np.floor(x[j::10] / 2.0 ** j) % 4).astype(int)
            rep = np.where(rng.random(len(cls)) < p4 - q4, cls, rng.integers(0, 4, len(cls)))
            reps.append(new.Cells(np.bincount(rep, minlength=4).astype(float), 0.0, 2.0 ** j, p4, q4))
        cen = float(np.median(x))
        bit = (x[9::10] >= cen).astype(int)
        rep = np.where(rng.random(len(bit)) < p2 - q2, bit, rng.integers(0, 2, len(bit)))
        reps.append(new.Cells(np.array([rep.sum(), len(rep) - rep.sum()], float), cen, 2.0 ** 15, p2, q2))
        search = new.Search(cen, sd * 2, sd / 8, sd * 8)
        lo, hi = sd / 2, sd * 2
        a = old.check_sigma(reps[:9], (lo, hi), old.Search(cen, sd * 2, sd / 8, sd * 8))
        b = new.check_sigma(reps[:9], (lo, hi), search)
        worst["check_sigma"] = max(worst["check_sigma"], abs(a.statistic - b.statistic), abs(a.sigma_fit - b.sigma_fit) / sd)
        flips += a.flagged != b.flagged
        pa_ = old.profile_estimate(reps, old.Search(cen, sd * 2, sd / 8, sd * 8), 0.95)
        pb_ = new.profile_estimate(reps, search, 0.95)
        worst["profile"] = max(worst["profile"], max(abs(u - v) for u, v in zip(pa_, pb_)) / sd)
        worst["gof"] = max(worst["gof"], abs(old.goodness_of_fit(reps, mu, sd) - new.goodness_of_fit(reps, mu, sd)))
    say(f"end to end on {k} simulated report sets (9 level reports r = 4 + one KVRR2 bit r = 2): max |ΔΛ| or "
        f"|Δσ_fit|/σ {worst['check_sigma']:.3g}; flagged flips {flips}; profile_estimate max |Δ|/σ "
        f"{worst['profile']:.3g}; goodness_of_fit max |Δp| {worst['gof']:.3g}")


def precision():
    """The near branch (σ < width/2) against a reference whose edge offsets (c·w − (µ − shift))/σ are computed exactly
    (fractions) and rounded once: the old form ((c+1)·w − µ)/σ is exact to rounding, the new divides first."""
    from fractions import Fraction as Fr
    from scipy.special import ndtr

    def ref(mu, sd, w, r):
        m = Fr(mu); out = np.zeros(r)
        c0 = int(np.floor(float(m / Fr(w))))
        for c in range(c0 - 12, c0 + 13):
            out[c % r] += ndtr(float((Fr(c + 1) * Fr(w) - m) / Fr(sd))) - ndtr(float((Fr(c) * Fr(w) - m) / Fr(sd)))
        return out
    rng = np.random.default_rng(1618)
    say("near-branch precision, max |π − reference| over 200 µ per ratio (σ = 0.3, width 1, r = 4):")
    for ratio in (1e6, 1e9, 1e11, 1e12, 1e13, 1e14, 1e15):
        wo = wn = 0.0
        for _ in range(200):
            mu = float(ratio * 0.3 * (1 + rng.random()))
            e = ref(mu, 0.3, 1.0, 4)
            wo = max(wo, float(np.abs(old.class_probabilities(mu, 0.3, 0.0, 1.0, 4)[0] - e).max()))
            wn = max(wn, float(np.abs(new.class_probabilities(mu, 0.3, 0.0, 1.0, 4)[0] - e).max()))
        say(f"  |µ − shift|/σ ~ {ratio:g}: old {wo:.2g}, new {wn:.2g}")


def far_end_to_end(k):
    """Level reports (r = 4, widths 2^j, shift 0) of N(µ, σ) data with µ/σ ~ 1e9-1e12 (a column declared over a wide
    range of µ with a small σ: x' = value − (low − 4σ) reaches the range's width): check_sigma and the profile fit,
    old against new."""
    rng = np.random.default_rng(1619)
    for mu, sd in ((1e6, 1e-3), (1e8, 1e-3), (1e9, 1e-3)):
        dstat = dfit = 0.0
        flips = 0
        for t in range(k):
            x = rng.normal(mu, sd, 20000)
            e = 2.0
            p4, q4 = np.exp(e) / (np.exp(e) + 3), 1 / (np.exp(e) + 3)
            reps = []
            for j in range(-12, -4):
                cls = (np.floor(x[(j + 12)::8] / 2.0 ** j) % 4).astype(int)
                rep = np.where(rng.random(len(cls)) < p4 - q4, cls, rng.integers(0, 4, len(cls)))
                reps.append(new.Cells(np.bincount(rep, minlength=4).astype(float), 0.0, 2.0 ** j, p4, q4))
            a = old.check_sigma(reps, (sd / 2, sd * 2), old.Search(mu, 2 * sd, sd / 64, sd * 8))
            b = new.check_sigma(reps, (sd / 2, sd * 2), new.Search(mu, 2 * sd, sd / 64, sd * 8))
            dstat = max(dstat, abs(a.statistic - b.statistic)); dfit = max(dfit, abs(a.sigma_fit - b.sigma_fit) / sd)
            flips += (a.flagged != b.flagged)
        say(f"  µ = {mu:g}, σ = {sd:g} (µ/σ = {mu / sd:g}), {k} report sets of 20,000 users: max |ΔΛ| {dstat:.3g}, "
            f"max |Δσ_fit|/σ {dfit:.3g}, flagged flips {flips}")


if __name__ == "__main__":
    cases = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
    fuzz(cases)
    class_probs_boundary()
    extremes()
    say("degenerate inputs:")
    degenerate()
    end_to_end(int(sys.argv[2]) if len(sys.argv) > 2 else 40)
    precision()
    say("far from the origin, end to end (old vs new):")
    far_end_to_end(int(sys.argv[3]) if len(sys.argv) > 3 else 20)
    (HERE / "gauss16.txt").write_text("\n".join(out_lines) + "\n")
