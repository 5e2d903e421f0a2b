"""The papers behind ldpql's mechanisms, cited by authors, title and year wherever users read about them.

EXPLAIN (a ``paper`` line under the chosen mechanism), HELP (``HELP LDP_MIN``), the README and ``docs/`` cite from
here, so that user-facing text never points at an internal label (a spec section, a seed number). Plain data:
no imports, no logic beyond formatting.

>>> cite("fukuchi2019")
'Fukuchi, Yu, Haishima and Sakuma, "Locally Differentially Private Minimum Finding" (arXiv, 2019)'
>>> mechanism_papers("bisect_min") == [cite("fukuchi2019")]
True
"""

from __future__ import annotations

# key -> (authors, title, venue and year)
PAPERS: dict[str, tuple[str, str, str]] = {
    "fukuchi2019": ("Fukuchi, Yu, Haishima and Sakuma", "Locally Differentially Private Minimum Finding",
                    "arXiv, 2019"),
    "aamand2025": ("Aamand, Boninsegna, Gentle, Imola and Pagh",
                   "Lightweight Protocols for Distributed Private Quantile Estimation", "ICML 2025"),
    "wang2016": ("Wang, Huang, Wang, Nie, Xu, Yang, Li and Qiao",
                 "Mutual Information Optimally Local Private Discrete Distribution Estimation", "arXiv, 2016"),
    "wang2023": ("Wang, Li, Li, Li, Yang and Yan",
                 "Differentially Private Numerical Vector Analyses in the Local and Shuffle Model",
                 "arXiv, 2023; extended from IJCAI 2021"),
    "joseph2019": ("Joseph, Kulkarni, Mao and Wu", "Locally Private Gaussian Estimation", "NeurIPS 2019"),
    "duchi2018": ("Duchi, Jordan and Wainwright", "Minimax Optimal Procedures for Locally Private Estimation",
                  "Journal of the American Statistical Association, 2018"),
    "wang2019": ("Wang, Xiao, Yang, Zhao, Hui, Shin, Shin and Yu",
                 "Collecting and Analyzing Multidimensional Data with Local Differential Privacy", "ICDE 2019"),
    "wang2017": ("Wang, Blocki, Li and Jha", "Locally Differentially Private Protocols for Frequency Estimation",
                 "USENIX Security 2017"),
    "kairouz2016": ("Kairouz, Bonawitz and Ramage", "Discrete Distribution Estimation under Local Privacy",
                    "ICML 2016"),
    "erlingsson2014": ("Erlingsson, Pihur and Korolova",
                       "RAPPOR: Randomized Aggregatable Privacy-Preserving Ordinal Response", "CCS 2014"),
    "acharya2019": ("Acharya, Sun and Zhang",
                    ("Hadamard Response: Estimating Distributions Privately, Efficiently, and with Little "
                     "Communication"), "AISTATS 2019"),
    "warner1965": ("Warner", "Randomized Response: A Survey Technique for Eliminating Evasive Answer Bias",
                   "Journal of the American Statistical Association, 1965"),
    "feldman2021": ("Feldman, McMillan and Talwar",
                    ("Hiding Among the Clones: A Simple and Nearly Optimal Analysis of Privacy Amplification by "
                     "Shuffling"), "FOCS 2021"),
    "feldman2023": ("Feldman, McMillan and Talwar",
                    "Stronger Privacy Amplification by Shuffling for Rényi and Approximate Differential Privacy",
                    "SODA 2023"),
    "dwork2006": ("Dwork, McSherry, Nissim and Smith", "Calibrating Noise to Sensitivity in Private Data Analysis",
                  "TCC 2006"),
    "canonne2020": ("Canonne, Kamath and Steinke", "The Discrete Gaussian for Differential Privacy", "NeurIPS 2020"),
    "li2020": ("Li, Wang, Lopuhaä-Zwakenberg, Li and Škorić",
               "Estimating Numerical Distributions under Local Differential Privacy", "SIGMOD 2020"),
}

# the five papers ldpql was built from (the README lists them)
FOUNDATIONS = ("fukuchi2019", "aamand2025", "wang2016", "wang2023", "joseph2019")

# mechanism name (as EXPLAIN and OPTIONS (mechanism = ...) spell it) -> papers
MECHANISMS: dict[str, tuple[str, ...]] = {
    "bisect_min": ("fukuchi2019",), "bisect_max": ("fukuchi2019",),
    "laplace_min": ("fukuchi2019",), "laplace_max": ("fukuchi2019",),
    "buckets_oue": ("wang2017",), "buckets_grr": ("kairouz2016",),   # ldpql's bucket search over an oracle
    "bayess": ("aamand2025",), "naive_nbs": ("aamand2025",), "hierarchical": ("aamand2025",),
    "shuffle_nbs": ("aamand2025", "feldman2023", "wang2023"),
    "collision": ("wang2023",), "coco": ("wang2023",),
    "ksubset_l2": ("wang2016",), "ksubset_mi": ("wang2016",), "grr": ("kairouz2016",), "oue": ("wang2017",),
    "olh": ("wang2017",), "brr": ("erlingsson2014",), "hadamard": ("acharya2019",),
    "duchi": ("duchi2018",), "piecewise": ("wang2019",), "hybrid": ("wang2019",), "rr": ("warner1965",),
    "laplace": ("dwork2006", "canonne2020"), "square_wave": ("li2020",),
    "gaussian": ("joseph2019",), "gaussian_1round": ("joseph2019",),
}

# aggregate -> papers of the mechanisms its planner chooses from
AGGREGATES: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(("LDP_MIN", "LDP_MAX"), ("fukuchi2019", "wang2017", "kairouz2016")),
    **dict.fromkeys(("LDP_QUANTILE", "LDP_MEDIAN"), ("aamand2025",)),
    **dict.fromkeys(("LDP_HISTOGRAM", "LDP_FREQUENCY", "LDP_TOPK", "LDP_MODE", "LDP_COUNT_DISTINCT"),
                    ("wang2016", "kairouz2016", "wang2017", "erlingsson2014", "acharya2019")),
    **dict.fromkeys(("LDP_MEAN", "LDP_AVG"), ("duchi2018", "wang2019", "joseph2019", "wang2023", "dwork2006", "li2020")),
    "LDP_SUM": ("duchi2018", "wang2019", "wang2023", "dwork2006", "li2020"),
    "LDP_COUNT": ("warner1965",),
}


def cite(key: str) -> str:
    """One paper as users read it: authors, "title" (venue, year)."""
    authors, title, venue = PAPERS[key]
    return f'{authors}, "{title}" ({venue})'


def mechanism_papers(mechanism: str) -> list[str]:
    """The citations of a mechanism ([] for one that asks no user or has no paper)."""
    return [cite(k) for k in MECHANISMS.get(mechanism, ())]


def aggregate_papers(name: str) -> list[str]:
    """The citations of the mechanisms an aggregate may run ([] when unknown)."""
    return [cite(k) for k in AGGREGATES.get(name.upper(), ())]
