"""LDP_HISTOGRAM, LDP_FREQUENCY, LDP_TOPK, LDP_MODE, LDP_COUNT_DISTINCT: one frequency-oracle release (seed 002).

All of them need the same thing from the users: one report of a frequency oracle over the column's declared
categories (OTHER last). Their Target names that release (``release``: the column, its encoding and the
arguments that shape the release), so in one statement the planner runs it once and charges its ε once, and
each aggregate derives its answer from the release's raw, unbiased estimate by post-processing (spec §6-7):

- ``LDP_HISTOGRAM(c)``, and ``LDP_FREQUENCY(c)`` with a plain column: one frequency per declared value;
- ``LDP_FREQUENCY(c = 'v')``: the frequency of one declared value;
- ``LDP_TOPK(c, k)``: the k most frequent values and their frequencies, largest first; each rank's interval is for
  the value found there, accounting for its selection (:mod:`ldpql.planner.winners`);
- ``LDP_MODE(c)``: the most frequent value;
- ``LDP_COUNT_DISTINCT(c)``: how many declared values occur, as a lower bound (spec §7's heuristic).

Frequencies are projected onto the probability simplex by default (``postprocess => 'simplex'``; also
``'clip'``, ``'base_pos'`` and ``'none'``, the raw estimate). Intervals always come from the raw estimate and
its closed-form variance, clipped to [0, 1]; the result says so.

The oracles (:data:`ORACLES`): GRR, the k-subset mechanism with its ℓ2-optimal and MI-optimal k, OUE, basic
RAPPOR (BRR), OLH and Hadamard response. The planner picks the smallest predicted ℓ2 error, √(E‖f̂ − f‖²₂),
from their closed forms at (d, ε, n) — data-independent, so it costs no budget — among those whose report fits
``max_report_bits => b``; EXPLAIN lists every oracle's k, p, q, risk, per-bin error, mutual information and
report size. ``subset_size => k`` asks for k-SS with that k.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Callable

import numpy as np

from ldpql import expr as E
from ldpql.catalog import OTHER, BooleanDomain, CategoricalDomain, NumericDomain, Table
from ldpql.errors import PlanError
from ldpql.grammar import ast
from ldpql.mechanisms import Encoding, Estimate, Randomizer, debiased_variance
from ldpql.mechanisms.base import debiased_total_variance
from ldpql.mechanisms.grr import GRR
from ldpql.mechanisms.hadamard import HadamardResponse
from ldpql.mechanisms.information import information_bound, mutual_information, subset_information
from ldpql.mechanisms.ksubset import KSubset, subset_size
from ldpql.mechanisms.olh import HASH_BITS, OLH
from ldpql.mechanisms.oue import OUE
from ldpql.mechanisms.unary import BRR
from ldpql.planner.aggregates import (AGGREGATES, AggregateSpec, _column_arg, _err, _missing_domain, candidate,
                                      register_aggregate)
from ldpql.planner.plan import Candidate, Target
from ldpql.planner.winners import correlations, rank, winners_interval

MAX_HISTOGRAM_SIZE = 100_000
POSTPROCESS = {"simplex": "simplex", "project": "simplex", "norm_sub": "simplex", "clip": "clip",
               "base_pos": "base_pos", "none": "none"}
RELEASE_ARGS = ("epsilon", "mechanism", "max_report_bits", "subset_size")   # they shape the shared release
NAMED_ARGS = {"postprocess": "'simplex' (the default: projected onto the simplex), 'clip', 'base_pos' or 'none'",
              "max_report_bits": "the largest report a user may send, in bits, e.g. max_report_bits => 64",
              "subset_size": "k-subset with this k instead of the planner's choice"}
UNIT = "ℓ2 (√ of the expected total squared error over the bins)"


# ---- post-processing (spec §5.2, §6) -----------------------------------------------------------------------

def project_simplex(v: np.ndarray) -> np.ndarray:
    """Euclidean projection of each row of v onto the probability simplex (Wang & Carreira-Perpiñán 2013):
    max(v + λ, 0) with the one λ that makes the row sum to 1. Equals norm-sub (Wang et al. 2020).

    >>> project_simplex(np.array([0.5, 0.3, 0.25, -0.05])).round(4).tolist()
    [0.4833, 0.2833, 0.2333, 0.0]
    """
    v = np.asarray(v, dtype=float)
    u = -np.sort(-v, axis=-1)
    css = np.cumsum(u, axis=-1) - 1
    j = np.arange(1, v.shape[-1] + 1)
    rho = np.count_nonzero(u - css / j > 0, axis=-1)          # the condition holds exactly for j <= rho
    lam = -np.take_along_axis(css, np.expand_dims(rho - 1, -1), axis=-1) / np.expand_dims(rho, -1)
    return np.maximum(v + lam, 0.0)


def postprocess(raw: np.ndarray, how: str) -> np.ndarray:
    """'simplex' (projection), 'clip' (clip at 0, renormalise), 'base_pos' (clip at 0) or 'none'."""
    if how == "none" or not np.all(np.isfinite(raw)):
        return np.asarray(raw, dtype=float)
    if how == "simplex":
        return project_simplex(raw)
    clipped = np.maximum(raw, 0.0)
    if how == "base_pos":
        return clipped
    total = clipped.sum()
    return clipped / total if total > 0 else np.full(len(raw), 1 / len(raw))


NOTES = {"simplex": "frequencies projected onto the probability simplex (postprocess => 'simplex')",
         "clip": "frequencies clipped at 0 and renormalised (postprocess => 'clip')",
         "base_pos": "frequencies clipped at 0, not renormalised (postprocess => 'base_pos')",
         "none": "raw unbiased frequency estimates (postprocess => 'none'): some can be negative"}


def _interval(raw: np.ndarray, se: np.ndarray, confidence: float, step: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """raw ± (z·se + step/2): half a lattice step more (a continuity correction), because at a high ε a bin's
    estimate stays put unless a report flips, and one flip moves it a whole step. The result clips it to [0, 1]
    (``reporting.feasible``; not with postprocess => 'none')."""
    half = NormalDist().inv_cdf(0.5 + confidence / 2) * se + step / 2
    return raw - half, raw + half


def _release(est: Estimate, d: int) -> tuple[np.ndarray, np.ndarray]:
    """The raw estimate and standard errors of a release (NaN when its cell had no users)."""
    raw, se = np.asarray(est.values, dtype=float), np.asarray(est.stderr, dtype=float)
    if len(raw) != d:
        return np.full(d, np.nan), np.full(d, np.nan)
    return raw, se


RANKED_NOTE = ("LDP_TOPK: each rank's interval is for the true frequency of the value found at that rank and "
               "accounts for its selection (the hybrid intervals of Andrews, Kitagawa & McCloskey, \"Inference on "
               "Winners\", 2024: the estimate of a value that came out j-th is biased up, and the interval corrects "
               "for it)")


def _frequencies(how: str, d: int, pick: Callable[..., np.ndarray] | None = None,
                 labels: tuple | None = None, ranked: bool = False):
    """derive(): the post-processed frequencies of bins ``pick(post, raw, step)`` (all bins when None), with intervals
    from the raw estimates; with ``labels``, the picked bins' labels go in extra['labels'] (LDP_TOPK); with
    ``ranked``, the intervals are :func:`~ldpql.planner.winners.winners_interval`'s for the picked ranks."""

    def derive(release: Estimate, confidence: float) -> Estimate:
        raw, se = _release(release, d)
        post = postprocess(raw, how)
        idx = np.arange(d) if pick is None else pick(post, raw, release.step)
        note = NOTES[how] + "; intervals are centred on the unbiased raw estimates" + (
            "" if how == "none" else " and clipped to [0, 1]")
        extra = {"labels": tuple(labels[i] if np.isfinite(post[i]) else None for i in idx)} if labels else {}
        if ranked:   # every value's frequency: EVALUATE checks each rank's interval at the value found there
            extra["frequencies"] = (labels, post)
        interval = _interval(raw[idx], se[idx], confidence, release.step)
        if ranked and np.all(np.isfinite(raw)):
            pairs = release.extra.get("pairs")   # correlated estimates (one report per user): their covariance
            interval = winners_interval(raw, se, len(idx), confidence, release.step,
                                        correlations(raw, pairs) if pairs else None, release.extra.get("skew"))
            note = NOTES[how] + "; " + RANKED_NOTE
        return Estimate(post[idx], se[idx], note=note, extra=extra, interval=interval, interval_confidence=confidence,
                        step=release.step)

    return derive


def _ranked(k: int) -> Callable[..., np.ndarray]:
    """The k largest post-processed frequencies, ties broken by the raw estimate, then as
    :func:`~ldpql.planner.winners.rank` breaks them (by the release-seeded jitter on a lattice of ``step``)."""
    def pick(post: np.ndarray, raw: np.ndarray, step: float = 0.0) -> np.ndarray:
        by_raw = np.empty(len(raw), dtype=np.int64)
        by_raw[rank(raw, step)] = np.arange(len(raw))
        return np.lexsort((by_raw, -post))[:k]
    return pick


def _mode(how: str, d: int, labels: tuple):
    def derive(release: Estimate, confidence: float) -> Estimate:
        raw, _ = _release(release, d)
        if not np.all(np.isfinite(raw)):
            return Estimate(np.array([None], dtype=object), np.array([np.nan]))
        post = postprocess(raw, how)
        top = int(_ranked(1)(post, raw, release.step)[0])
        return Estimate(np.array([labels[top]], dtype=object), np.array([np.nan]), extra={"frequency": post[top]},
                        note="LDP_MODE is the value with the largest estimated frequency; it has no interval")

    return derive


def _distinct(d: int, labels: tuple):
    """derive() of LDP_COUNT_DISTINCT (spec §7, a heuristic): the declared values whose raw frequency estimate
    is significantly above 0, Bonferroni over the d bins. With probability >= the confidence none of them is
    absent, so the count is a lower bound on the number of distinct declared values (interval [count, d]);
    rare values go unseen, so it is biased low. OTHER may hold several undeclared values and is not counted."""
    declared = np.array([label != OTHER for label in labels])

    def derive(release: Estimate, confidence: float) -> Estimate:
        raw, se = _release(release, d)
        if not np.all(np.isfinite(raw)):
            return Estimate(np.array([np.nan]), np.array([np.nan]))
        z = NormalDist().inv_cdf(1 - (1 - confidence) / d)
        count = float(np.count_nonzero(declared & (raw > z * se)))
        return Estimate(np.array([count]), np.array([np.nan]), note=DISTINCT_NOTE,
                        interval=(np.array([count]), np.array([float(declared.sum())])), interval_confidence=confidence)

    return derive


DISTINCT_NOTE = ("LDP_COUNT_DISTINCT is approximate: it counts the declared values whose frequency is significantly "
                 "above 0 (Bonferroni over the bins), a lower bound that misses rare values; the interval is "
                 "[that count, the number of declared values]")


# ---- the frequency oracles ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Oracle:
    """A frequency oracle the planner can choose: its randomizer at (ε, d)."""

    name: str
    make: Callable[[float, int], Randomizer]
    aliases: tuple[str, ...] = ()   # other names `mechanism = '...'` accepts (spec §7)


def _ksubset(objective: str) -> Callable[[float, int], Randomizer]:
    def make(eps: float, d: int) -> Randomizer:
        k = subset_size(d, eps, objective)
        return KSubset(eps, d, k) if k > 1 else GRR(eps, d)   # k = 1 is exactly GRR (spec §2.1)
    return make


ORACLES = (Oracle("grr", GRR, ("mrr",)), Oracle("ksubset_l2", _ksubset("l2"), ("ksubset",)),
           Oracle("ksubset_mi", _ksubset("mi")), Oracle("oue", OUE), Oracle("brr", BRR, ("rappor", "sue")),
           Oracle("olh", OLH), Oracle("hadamard", HadamardResponse))


def report_bits(r: Randomizer) -> int:
    """Size of one user's report on the wire: an index, k indices or a d-bit map, a hash seed and a value."""
    d = r.input_size
    index = max(1, math.ceil(math.log2(d)))
    return {"grr": index, "ksubset": min(getattr(r, "subset_size", 1) * index, d), "oue": d, "brr": d,
            "olh": HASH_BITS + max(1, math.ceil(math.log2(getattr(r, "g", 2)))),
            "hadamard": int(math.log2(getattr(r, "size", 2)))}[r.name]


def _parameters(r: Randomizer) -> str:
    return {"ksubset": f"k={getattr(r, 'subset_size', 1)}", "grr": "k=1", "olh": f"g={getattr(r, 'g', 0)}",
            "hadamard": f"K={getattr(r, 'size', 0)}"}.get(r.name, "")


def oracle_table(oracles: list[Oracle], d: int, eps: float, n: int, chosen: str) -> list[str]:
    """EXPLAIN lines: every oracle's parameters, hit rates, risk, per-bin error at f_i = 0, MI and report bits."""
    if math.isinf(eps):
        return ["oracles     noise off (EPSILON INF): every oracle is the identity"]
    lines = [f"oracles     at ε = {eps:.4g}, d = {d:,}, n = {n:,}; risk = n·E‖f̂−f‖²₂ (any f, before post-processing)",
             "            sd₀ = std. error of a bin with f_i = 0; MI = I(X;Y) in nats for a uniform X; bits per report",
             f"  {'':2}{'oracle':<11} {'param':>7} {'p':>9} {'q':>9} {'risk':>10} {'sd₀':>9} {'MI':>9} {'bits':>7}"]
    for o in oracles:
        r = o.make(eps, d)
        risk = debiased_total_variance(d, 1, r.p, r.q)
        sd0 = math.sqrt(float(debiased_variance(0.0, n, r.p, r.q)))
        mark = "* " if o.name == chosen else "  "
        lines.append(f"  {mark}{o.name:<11} {_parameters(r):>7} {r.p:>9.3e} {r.q:>9.3e} {risk:>10.4g} {sd0:>9.3g} "
                     f"{mutual_information(r):>9.3e} {report_bits(r):>7,}")
    k_mi = subset_size(d, eps, "mi")
    lines.append(f"MI bound    {subset_information(d, k_mi, eps):.4g} nats for any ε-LDP channel on d = {d:,} values "
                 f"(k-subset, k = {k_mi}; Thm 2.1), {information_bound(eps):.4g} for any d")
    return lines


# ---- resolving the aggregates ------------------------------------------------------------------------------

@dataclass
class FrequencyTarget(Target):
    """A Target whose users report one frequency-oracle release of a categorical column."""

    max_report_bits: int | None = None
    subset_size: int | None = None
    postprocess: str = "simplex"
    interval_note: str = ""   # EXPLAIN's line on what the intervals are for, when not per value (LDP_TOPK)


def _categories(col, ref, text: str) -> tuple[Encoding, tuple, str]:
    """A categorical, boolean or integer-range column: its index encoding, labels (OTHER last) and description."""
    dom = col.domain
    if isinstance(dom, (CategoricalDomain, BooleanDomain)):
        labels = dom.labels if isinstance(dom, CategoricalDomain) else (False, True)
        return Encoding(dom.index(col.name), dom.size, col.name), labels, dom.describe()
    if isinstance(dom, NumericDomain) and dom.integer:
        if dom.size > MAX_HISTOGRAM_SIZE:
            raise _err(PlanError, f"`{col.name}` has {dom.size:,} values, too many bins for a histogram", ref,
                       text, hint=f"at most {MAX_HISTOGRAM_SIZE:,}; pre-bucket the column in the query that declares the table")
        labels = tuple(int(dom.low) + i for i in range(dom.size))
        return Encoding(dom.index(col.name), dom.size, col.name), labels, f"{dom.describe()}; {dom.size:,} values"
    if isinstance(dom, NumericDomain):
        raise _err(PlanError, f"`{col.name}` is continuous (BETWEEN without INTEGER); a histogram needs "
                   "categories", ref, text, hint="declare it INTEGER BETWEEN lo AND hi, or IN (...)")
    raise _missing_domain(col, ref, text, "a histogram")


def _named_options(call: ast.Call, d: int, text: str) -> dict:
    """postprocess, max_report_bits and subset_size, checked."""
    out = {}
    for arg in call.named:
        v = arg.value.value
        if arg.name == "postprocess":
            if str(v).lower() not in POSTPROCESS:
                raise _err(PlanError, f"postprocess must be one of 'simplex', 'clip', 'base_pos', 'none', not {v!r}",
                           arg, text, hint="'simplex' (the default) projects the estimates onto the simplex")
            out["postprocess"] = POSTPROCESS[str(v).lower()]
        elif arg.name == "max_report_bits":
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 1 or v != int(v):
                raise _err(PlanError, f"max_report_bits must be a positive integer, not {v!r}", arg, text,
                           hint="for example max_report_bits => 64")
            out["max_report_bits"] = int(v)
        elif arg.name == "subset_size":
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v != int(v) or not 1 <= v <= d - 1:
                raise _err(PlanError, f"subset_size must be an integer from 1 to {d - 1} (d = {d}), not {v!r}",
                           arg, text, hint="or leave it out: the planner chooses k")
            out["subset_size"] = int(v)
    return out


def _release_key(call: ast.Call, col: str, enc: Encoding) -> tuple:
    args = tuple(sorted((a.name, str(a.value.value).lower()) for a in call.named if a.name in RELEASE_ARGS))
    return ("frequency oracle", col.lower(), enc.expr, enc.size) + args


def _target(call: ast.Call, table: Table, text: str, ref: ast.ColumnRef) -> tuple[FrequencyTarget, tuple]:
    """The release Target of ``ref`` (its derive and categories are filled in by the caller) and the labels."""
    _, col = _column_arg(ast.Call(call.name, (ref,), pos=call.pos), table, text)
    enc, labels, text_domain = _categories(col, ref, text)
    opts = _named_options(call, enc.size, text)
    target = FrequencyTarget(col.name, enc, text_domain, None, UNIT, release=_release_key(call, col.name, enc),
                             **opts)
    return target, labels


def resolve_histogram(call: ast.Call, table: Table, text: str) -> Target:
    """LDP_HISTOGRAM(c) / LDP_FREQUENCY(c): one frequency per declared value; LDP_FREQUENCY(c = 'v'): one;
    LDP_HISTOGRAM(c1, c2, ...): one per combination of declared values."""
    one_value = len(call.args) == 1 and isinstance(call.args[0], ast.Comparison)
    if one_value and call.name.upper() == "LDP_FREQUENCY":
        return _resolve_one_value(call, table, text)
    if len(call.args) > 1 and call.name.upper() == "LDP_HISTOGRAM":
        return _resolve_joint(call, table, text)
    ref = call.args[0] if len(call.args) == 1 and isinstance(call.args[0], ast.ColumnRef) else None
    if ref is None or call.star:
        raise _err(PlanError, f"{call.name.upper()} takes a column" + (" or a condition column = value"
                   if call.name.upper() == "LDP_FREQUENCY" else ""), call, text,
                   hint=f"write {AGGREGATES[call.name.upper()].signature}")
    target, labels = _target(call, table, text, ref)
    target.categories, target.derived = labels, f"all {len(labels)} frequencies ({target.postprocess})"
    target.derive = _frequencies(target.postprocess, len(labels))
    return target


def _resolve_joint(call: ast.Call, table: Table, text: str) -> Target:
    """LDP_HISTOGRAM(c1, c2, ...): the joint distribution of several private columns, as one histogram over the
    product of their domains (spec §7's joint domain for a private key): each user reports one value of it, so
    the statement's ε is spent once, and the planner picks the oracle for the joint d."""
    if call.star or not all(isinstance(a, ast.ColumnRef) for a in call.args):
        raise _err(PlanError, "LDP_HISTOGRAM takes columns", call, text, hint="for example LDP_HISTOGRAM(city, smoker)")
    parts = [_categories(_column_arg(ast.Call(call.name, (ref,), pos=call.pos), table, text)[1], ref, text)
             for ref in call.args]
    names = [table.column(ref.name).name for ref in call.args]
    if len({n.lower() for n in names}) < len(names):
        raise _err(PlanError, "LDP_HISTOGRAM names a column twice", call, text, hint="name each column once")
    size = math.prod(enc.size for enc, _, _ in parts)
    if size > MAX_HISTOGRAM_SIZE:
        raise _err(PlanError, f"the joint domain of {', '.join(names)} has {size:,} values, too many bins", call, text,
                   hint=f"at most {MAX_HISTOGRAM_SIZE:,}; use fewer columns or coarser domains")
    enc = Encoding(E.mixed_radix([(enc.expr, enc.size) for enc, _, _ in parts]), size, "_".join(names))
    labels = tuple(", ".join(map(str, combo)) for combo in itertools.product(*(labels for _, labels, _ in parts)))
    target = FrequencyTarget("_".join(names), enc, " × ".join(f"{n} {t}" for n, (_, _, t) in zip(names, parts)) +
                             f"; joint domain of {size:,} values", labels, UNIT,
                             release=_release_key(call, "_".join(names), enc), **_named_options(call, size, text))
    target.derived = f"all {size} joint frequencies ({target.postprocess})"
    target.derive = _frequencies(target.postprocess, size)
    return target


def _resolve_one_value(call: ast.Call, table: Table, text: str) -> Target:
    cmp = call.args[0]
    sides = (cmp.left, cmp.right) if isinstance(cmp.left, ast.ColumnRef) else (cmp.right, cmp.left)
    ref, value = sides
    if cmp.op != "=" or not isinstance(ref, ast.ColumnRef) or not isinstance(value, ast.Literal):
        raise _err(PlanError, "LDP_FREQUENCY takes a column, or a condition column = value", cmp, text,
                   hint="for example LDP_FREQUENCY(city = 'Paris'); for other conditions use LDP_COUNT(...)")
    target, labels = _target(call, table, text, ref)
    matches = [j for j, label in enumerate(labels) if _same(label, value.value)]
    if not matches:
        shown = ", ".join(repr(v) for v in labels[:8]) + (", ..." if len(labels) > 8 else "")
        raise _err(PlanError, f"{value.sql()} is not a declared value of `{target.column}`", value, text,
                   hint=f"declared values: {shown}" + ("; anything else is counted in OTHER" if "OTHER" in labels
                                                       else f" ({target.domain_text})"))
    j = matches[0]
    target.derive = _frequencies(target.postprocess, len(labels), lambda post, raw, step: np.array([j]))
    target.derived, target.unit = f"the frequency of {value.sql()} ({target.postprocess})", UNIT
    return target


def _same(label, value) -> bool:
    """A declared label equals a literal of the same kind (TRUE is not 1, '3' is not 3)."""
    if isinstance(label, bool) != isinstance(value, bool) or isinstance(label, str) != isinstance(value, str):
        return False
    return label == value


def resolve_topk(call: ast.Call, table: Table, text: str) -> Target:
    """LDP_TOPK(c, k): the k most frequent declared values, largest first."""
    if call.star or len(call.args) != 2 or not isinstance(call.args[0], ast.ColumnRef):
        raise _err(PlanError, "LDP_TOPK takes a column and a number k", call, text, hint="for example LDP_TOPK(city, 3)")
    k_arg = call.args[1]
    k = k_arg.value if isinstance(k_arg, ast.Literal) else None
    if isinstance(k, bool) or not isinstance(k, (int, float)) or k != int(k) or k < 1:
        raise _err(PlanError, f"the k of LDP_TOPK must be a positive integer, not {k_arg.sql()}", k_arg, text,
                   hint="for example LDP_TOPK(city, 3)")
    target, labels = _target(call, table, text, call.args[0])
    k = min(int(k), len(labels))
    target.categories = (None,) * k   # one row per rank; each answer carries its values' labels
    target.derive = _frequencies(target.postprocess, len(labels), _ranked(k), labels, ranked=True)
    target.derived = f"the {k} largest frequencies ({target.postprocess}) and their values"
    target.interval_note = ("rank j's is for the true frequency of the value found there and accounts for its "
                            "selection (Andrews, Kitagawa & McCloskey, \"Inference on Winners\", 2024)")
    return target


def resolve_count_distinct(call: ast.Call, table: Table, text: str) -> Target:
    """LDP_COUNT_DISTINCT(c): how many declared values occur, approximately (a one-sided bound)."""
    ref, _ = _column_arg(call, table, text)
    target, labels = _target(call, table, text, ref)
    target.derive, target.derived = _distinct(len(labels), labels), "the number of values seen with confidence"
    return target


def resolve_mode(call: ast.Call, table: Table, text: str) -> Target:
    """LDP_MODE(c): the declared value with the largest estimated frequency."""
    ref, _ = _column_arg(call, table, text)
    target, labels = _target(call, table, text, ref)
    target.derive, target.derived = _mode(target.postprocess, len(labels), labels), "the most frequent value"
    return target


# ---- candidates --------------------------------------------------------------------------------------------

def frequency_candidates(target: FrequencyTarget) -> list[Candidate]:
    """One candidate per oracle (or only k-SS with the asked subset_size); the smallest predicted ℓ2 wins."""
    d = target.encoding.size
    oracles = list(ORACLES)
    if target.subset_size is not None:
        k = target.subset_size
        oracles = [Oracle("ksubset", lambda e, d: KSubset(e, d, k) if k > 1 else GRR(e, d))]
    uniform = np.full(d, 1.0 / d)   # every oracle's total squared error is the same for every f
    out = []
    for o in oracles:
        c = candidate(o.name, lambda e, o=o: o.make(e, d), target, uniform)
        c.check, c.aliases = _report_cap(o, d, target.max_report_bits), o.aliases
        c.describe = lambda e, n, name=o.name: oracle_table(oracles, d, e, n, name) + [
            f"post        {NOTES[target.postprocess]}; intervals from the raw estimates"] + (
            [f"intervals   {target.interval_note}"] if target.interval_note else [])
        out.append(c)
    return out


def _report_cap(o: Oracle, d: int, cap: int | None) -> Callable[[float, int], str | None] | None:
    if cap is None:
        return None

    def check(eps: float, n: int) -> str | None:
        bits = report_bits(o.make(1.0 if math.isinf(eps) else eps, d))
        return f"a report has {bits:,} bits, more than max_report_bits => {cap:,}" if bits > cap else None

    return check


SIGNATURES = {"LDP_HISTOGRAM": "LDP_HISTOGRAM(column [, column ...])", "LDP_FREQUENCY": "LDP_FREQUENCY(column [= value])",
              "LDP_TOPK": "LDP_TOPK(column, k)", "LDP_MODE": "LDP_MODE(column)",
              "LDP_COUNT_DISTINCT": "LDP_COUNT_DISTINCT(column)"}
register_aggregate(AggregateSpec("LDP_HISTOGRAM", SIGNATURES["LDP_HISTOGRAM"],
                                 "frequency of each declared value of a categorical or integer column", "histogram",
                                 resolve_histogram, frequency_candidates, NAMED_ARGS))
register_aggregate(AggregateSpec("LDP_FREQUENCY", SIGNATURES["LDP_FREQUENCY"],
                                 "frequency of each declared value (a column), or of one value (column = value)",
                                 "frequency", resolve_histogram, frequency_candidates, NAMED_ARGS))
register_aggregate(AggregateSpec("LDP_TOPK", SIGNATURES["LDP_TOPK"],
                                 "the k most frequent declared values and their frequencies", "topk",
                                 resolve_topk, frequency_candidates, NAMED_ARGS))
register_aggregate(AggregateSpec("LDP_MODE", SIGNATURES["LDP_MODE"], "the most frequent declared value", "mode",
                                 resolve_mode, frequency_candidates, NAMED_ARGS))
register_aggregate(AggregateSpec("LDP_COUNT_DISTINCT", SIGNATURES["LDP_COUNT_DISTINCT"],
                                 "how many declared values occur (approximate: a lower bound)", "count_distinct",
                                 resolve_count_distinct, frequency_candidates, NAMED_ARGS))
