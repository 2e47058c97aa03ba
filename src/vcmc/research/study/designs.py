"""The generalisation suite: designs of other shapes than the paper's six scenarios.

The paper validates VCMC on one shape of problem (4 silos of 1,000 rows, 10 variables of 2-3 modalities).
These designs span what users bring: 2 to 30 silos, 10 to 80 variables of 2 to 6 modalities, sparse
binary conditions as in health records (prevalences 1-30%), silos of 200 to 10,000 rows and unequal within
a run, 3 to 27 true clusters down to 0.5% of the data, clusters present in one silo only and clusters
spread over all, easy and poor separability. Each design is named ``shape/separability`` so that it runs
through the same study machinery as the paper's scenarios (``vcmc.research.study.runner``).

The structure of a design (silo sizes, which cluster lives where, how many modalities) is fixed; the
profiles and the data are drawn anew for every replicate from its seed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from vcmc._rng import RngLike, as_seed_sequence
from vcmc.exceptions import ConfigError

__all__ = ["Design", "GENERALISATION_DESIGNS", "QUICK_DESIGNS", "get_design", "is_design"]


@dataclass(frozen=True)
class Design:
    """One shape of federated data.

    Attributes
    ----------
    name : str
        ``shape/separability``.
    description : str
        One line for the tables.
    silo_sizes : tuple of int
        Rows of each silo.
    weights : tuple of tuple of float
        Cluster probabilities of each silo (S rows of C values, each row sums to 1).
    n_modalities : tuple of int
    profile : {"dirichlet", "sparse-binary"}
        Profiles from a symmetric Dirichlet(``concentration``) per (cluster, variable), or sparse binary
        conditions (``vcmc.research.simulate.sparse_binary_profiles`` with ``sparse``).
    concentration : float
    sparse : dict
        Keyword arguments of ``sparse_binary_profiles``.
    n_components : int
        C+ of the over-fitted model for this design (at least 1.5 times the true number of clusters).
    """

    name: str
    description: str
    silo_sizes: tuple[int, ...]
    weights: tuple[tuple[float, ...], ...]
    n_modalities: tuple[int, ...]
    profile: str = "dirichlet"
    concentration: float = 1.0
    sparse: dict = field(default_factory=dict, hash=False, compare=False)
    n_components: int = 15

    @property
    def n_silos(self) -> int:
        return len(self.silo_sizes)

    @property
    def n_clusters(self) -> int:
        return len(self.weights[0])

    def simulate(self, rng: RngLike = None, *, scale: float = 1.0):
        """One dataset of this design (``scale`` multiplies every silo size, for quick runs)."""
        from vcmc.research.simulate import simulate, sparse_binary_profiles

        root = as_seed_sequence(rng)
        profile_seed, data_seed = root.spawn(2)
        sizes = np.maximum(np.round(np.asarray(self.silo_sizes) * scale).astype(np.int64), 20)
        profiles = None
        if self.profile == "sparse-binary":
            profiles = sparse_binary_profiles(self.n_clusters, len(self.n_modalities), rng=profile_seed,
                                              **self.sparse)
        else:
            gen = np.random.default_rng(profile_seed)
            profiles = np.concatenate([gen.dirichlet(np.full(k, self.concentration), size=self.n_clusters)
                                       for k in self.n_modalities], axis=1)
        design, _, sep = self.name.partition("/")
        return simulate(n_per_silo=sizes, weights=np.asarray(self.weights), n_modalities=self.n_modalities,
                        profiles=profiles, rng=data_seed, design=design, separability=sep)


def _rows(matrix) -> tuple[tuple[float, ...], ...]:
    w = np.asarray(matrix, dtype=np.float64)
    w = w / w.sum(axis=1, keepdims=True)
    return tuple(tuple(float(x) for x in row) for row in w)


def _geometric(first: float, last: float, n: int) -> np.ndarray:
    g = np.exp(np.linspace(np.log(first), np.log(last), n))
    return g / g.sum()


def _wide(separability: str, concentration: float) -> Design:
    w = np.zeros((8, 8))
    w[:, :6] = 1.0
    w[0, 6] = w[1, 7] = 1.0
    return Design(f"wide-20x4/{separability}",
                  "8 silos x 500, 20 variables x 4 modalities, 8 clusters (2 in one silo only)",
                  (500,) * 8, _rows(w), (4,) * 20, concentration=concentration)


def _sparse25() -> Design:
    return Design("sparse-25/medium", "5 silos x 1,000, 25 sparse binary conditions, 6 classes of 45% to 3%",
                  (1000,) * 5, _rows(np.tile([0.45, 0.20, 0.15, 0.10, 0.07, 0.03], (5, 1))), (2,) * 25,
                  profile="sparse-binary", sparse={"high": (0.40, 0.80), "n_high": (3, 5)})


def _two_unequal() -> Design:
    w = [[0.25, 0.25, 0.25, 0.25], [0.45, 0.35, 0.20, 0.0]]
    return Design("two-unequal/poor", "2 silos of 300 and 6,000, 10 variables of 2-6 modalities, 4 clusters "
                  "(one in the small silo only)", (300, 6000), _rows(w), (2, 2, 3, 3, 4, 4, 5, 5, 6, 6),
                  concentration=1.0)


def _sixteen_small() -> Design:
    w = np.zeros((16, 10))
    w[:, :6] = 1.0
    w[[0, 1], 6] = 1.0
    w[2, 7] = 1.0
    w[[5, 6], 8] = 1.0
    w[9, 9] = 1.0
    sizes = tuple(int(x) for x in np.round(np.linspace(200, 800, 16)))
    return Design("sixteen-small/easy", "16 silos of 200-800, 25 variables x 3 modalities, 10 clusters "
                  "(4 in one or two silos only)", sizes, _rows(w), (3,) * 25, concentration=0.5)


def _thirty_sparse() -> Design:
    sizes = tuple(int(x) for x in np.round(np.exp(np.linspace(np.log(300), np.log(3000), 30))))
    g = np.array([0.30, 0.20, 0.12, 0.10, 0.08, 0.06, 0.05, 0.04, 0.02, 0.015, 0.01, 0.005])
    return Design("thirty-sparse/easy", "30 silos of 300-3,000, 80 sparse binary conditions, 12 classes of 30% "
                  "to 0.5%, spread over all silos", sizes, _rows(np.tile(g, (30, 1))), (2,) * 80,
                  profile="sparse-binary", sparse={"high": (0.35, 0.70)}, n_components=20)


def _fifty_mixed() -> Design:
    n_mod = tuple(int(2 + q % 5) for q in range(50))
    return Design("fifty-mixed/poor", "4 silos x 2,000, 50 variables of 2-6 modalities, 15 clusters of 20% "
                  "to 1%", (2000,) * 4, _rows(np.tile(_geometric(0.20, 0.01, 15), (4, 1))), n_mod,
                  concentration=1.0, n_components=25)


def _many27() -> Design:
    g = _geometric(0.15, 0.005, 27)
    w = np.tile(g, (8, 1))
    # the nine smallest clusters (0.5-1.5% of the data) live in two silos each, where they are 2-6%
    for j, c in enumerate(range(18, 27)):
        keep = {(2 * j) % 8, (2 * j + 1) % 8}
        for s in range(8):
            w[s, c] = 4.0 * g[c] if s in keep else 0.0
    return Design("many-27/easy", "8 silos x 1,500, 25 variables x 3 modalities, 27 clusters of 15% to 0.5% "
                  "(the 9 smallest in two silos each)", (1500,) * 8, _rows(w), (3,) * 25, concentration=0.3,
                  n_components=40)


def _big_silos() -> Design:
    return Design("big-silos/poor", "4 silos x 10,000, the paper's 10 variables, 3 clusters", (10_000,) * 4,
                  _rows(np.tile([0.5, 0.3, 0.2], (4, 1))), (2, 2, 2, 2, 3, 3, 3, 3, 3, 3), concentration=1.0)


def _regional() -> Design:
    sizes = (500, 800, 1200, 2000, 4000, 600, 1500, 3000)
    w = np.zeros((8, 8))
    w[:, 0] = 3.0                                   # one large cluster everywhere
    for c in range(1, 8):                           # each other cluster in 1-3 neighbouring silos
        for s in range(c - 1, c - 1 + 1 + (c % 3)):
            w[s % 8, c] = 2.0
    n_mod = (2, 3, 4, 5, 2, 3, 4, 5, 2, 3, 4, 5, 2, 3, 4)
    return Design("regional/poor", "8 silos of 500-4,000, 15 variables of 2-5 modalities, 8 clusters, 7 of "
                  "them in 1-3 silos only", sizes, _rows(w), n_mod, concentration=1.0)


def _sparse40_poor() -> Design:
    return Design("sparse-40/poor", "16 silos x 600, 40 sparse binary conditions, 8 classes, weak signals",
                  (600,) * 16, _rows(np.tile(_geometric(0.30, 0.04, 8), (16, 1))), (2,) * 40,
                  profile="sparse-binary", sparse={"high": (0.25, 0.45), "n_high": (3, 6)})


def _eighty_mixed() -> Design:
    n_mod = tuple(int(2 + q % 5) for q in range(80))
    return Design("eighty-mixed/poor", "4 silos x 1,000, 80 variables of 2-6 modalities, 6 clusters",
                  (1000,) * 4, _rows(np.tile(np.full(6, 1 / 6), (4, 1))), n_mod, concentration=1.0)


def _all() -> dict[str, Design]:
    designs = [_wide("easy", 0.5), _wide("poor", 1.0), _sparse25(), _two_unequal(), _sixteen_small(),
               _thirty_sparse(), _fifty_mixed(), _many27(), _big_silos(), _regional(), _sparse40_poor(),
               _eighty_mixed()]
    return {d.name: d for d in designs}


GENERALISATION_DESIGNS: dict[str, Design] = _all()
#: Small, fast designs of the quick profile (tests).
QUICK_DESIGNS: tuple[str, ...] = ("wide-20x4/easy", "sixteen-small/easy", "two-unequal/poor")


def is_design(name: str) -> bool:
    """Whether ``name`` is one of the generalisation designs."""
    return str(name) in GENERALISATION_DESIGNS


def get_design(name: str) -> Design:
    if name not in GENERALISATION_DESIGNS:
        raise ConfigError(f"The design {name!r} must be one of {', '.join(GENERALISATION_DESIGNS)}. Got "
                          f"{name!r} instead.")
    return GENERALISATION_DESIGNS[name]
