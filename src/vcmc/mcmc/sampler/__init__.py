"""Gibbs sampler of the over-fitted latent class model (docs/design.md §2 and §4.1).

One compiled kernel per path (``kernels_dense._gibbs_block``, ``kernels_sparse._gibbs_block_sparse``) runs a
block of Gibbs iterations; one driver (:func:`run_chain`)
owns the loop: random initialisation, burn-in, thinning, progress and the hand-over of kept draws to the
caller (``on_block``), so that the allocations of kept iterations are streamed and never accumulated.

One iteration (a systematic-scan Gibbs sweep, docs/design.md §4.1):

1. allocations ``z_i | pi, p`` for every row, ``P(z_i = c) ∝ pi_c prod_q p^q_{x_iq, c}`` (missing values
   contribute the factor 1);
2. weights ``pi | z ~ Dir(alpha_local + n_c)``;
3. profiles ``p^q_c | z, X ~ Dir(beta_local^q + n^q_{c, .})``.

The state after an iteration is ``(z, pi, p)`` with ``(pi, p)`` drawn given that ``z``; it is what a kept
draw records.

Speed: the allocation step multiplies float32 probabilities from a
(modality x component) table whose component axis is contiguous and padded to a multiple of 8, with
explicit 8-lane vector operations (``_v8_*``: numba's loop vectoriser leaves 16-lane loops scalar), instead
of adding log-probabilities and exponentiating per row and component; each table column is divided by its
maximum over components (a constant per modality cancels in the categorical), the product is renormalised
every ``_VARS_PER_BLOCK`` variables so that many variables never underflow, and a row whose best component
still falls below ``_FALLBACK_BELOW`` is recomputed exactly in float64 log space. Consecutive variables are
grouped and each group gets a joint table per iteration (one lookup per group instead of one per variable:
3 instead of 10 for the paper's variables, 10 instead of 80 for 80 binary ones), counts are kept per group
code and expanded once per sweep, and rows with identical patterns share one likelihood computation. The
categorical draw is branch-free (running sums per block of 4 lanes).

Gamma draws (about ``C+ (P + 1)`` per sweep: 405 for the paper's setting) use an inlined Marsaglia-Tsang
generator, ``G(a) = G(a + 1) exp(-E / a)`` below shape 1, and one flat loop per component. Sparse Dirichlet
draws are made in log space (:mod:`vcmc.dirichlet`): ``Gamma(a)`` with a tiny shape is exactly 0 in about
half the draws at ``a = 1e-3``, so for shapes below ``_LOG_PATH_SHAPE`` we use
``log G(a) = log G(a + 1) - E / a`` (``E ~ Exp(1)``, i.e. ``log U``) and normalise with log-sum-exp.

Two allocation paths. The grouped tables above cost per row in proportion to the number of variables. For
data where most cells hold one code per variable (electronic health records: ~80 binary conditions, ~6
present per person) the sparse path (:mod:`.kernels_sparse`) multiplies, per row, only the ratios of its
non-baseline (and missing) cells to a per-variable baseline code, in float64 (the ratios' range needs it),
with the same exact log-space fallback; its counts are kept per exception and the baseline counts derived.
``run_chain`` picks the path from the data (``layout="auto"``: the sparse one when its estimated work per
sweep is below half the dense path's, :func:`.layout.choose_layout`); the paper's data stay on the
dense path, whose draws are unchanged. Both paths sample the same model exactly but consume the random
stream differently.

Measured (``benchmarks/sampler.py``, one core shared with other jobs, medians of 5 chains):

* (a) n = 1000, 4 binary + 6 ternary variables, C+ = 15, dense path: about 5.3 times faster than a
  straightforward numba loop, i.e. ~35 us per iteration ; roughly
  75% allocation (a quarter of it the likelihood products, the rest the per-row uniform, draw and
  counts), 20% Gamma draws, 10% tables and count expansion (``--breakdown``);
* (b) n = 10,000, 80 binary variables (Dirichlet(0.5) profiles, 31 non-baseline values per row), C+ = 30:
  sparse path (chosen) ~0.92 ms per iteration, dense path ~2.3 ms;
* (c) an EHR-like silo, n = 9,700, 80 binary conditions (6.1 present per person, 2 to 33), 27 clusters,
  C+ = 30: sparse path (chosen) ~0.39 ms per iteration, dense path ~1.7 ms (4.4 times); ~75% allocation,
  ~20% Gamma draws (bound by the bit generator: ~13,000 variates per sweep), 5% uniforms. Building the
  sparse layout of 290,000 x 80 such rows takes ~0.1 s. The patterns in order of their number of
  exceptions and the paired products made the sparse path 0.88 times as costly (CPU time,
  ``--against``; docs/results/ehr/README.md). The allocation step is bound by per-pattern
  latency (the exceptions loop and its exit), not by the lanes: computing 16 of the 32 lanes (the rest
  reached through an exact bound) saved under 10% with no bound ever hit and lost 30% with the bound's
  real hit rate (16% of the rows). Also measured and not kept (session of 2026-12-02, case c, alternating
  runs of the two checkouts): counts updated only for the rows that change component (a fifth of them once
  mixed) instead of recounting every row, and the exception products in 8-lane (AVX-512) vectors instead of
  4-lane ones: neither changed the time per iteration beyond the machine's noise (min of 6 runs 2.03 against
  2.02 s for 4,000 iterations; breakdown allocation 252-270 against 249-273 us), which again points at the
  per-pattern latency, not at the count updates or the multiplications.

Modules, by responsibility: ``intrinsics`` (explicit 8-lane float32 and 4-lane float64 vector operations
emitted through llvmlite), ``layout`` (the data layouts of the two paths, code checks and the path choice),
``draws`` (weights and profiles given the allocations, counts, the log joint), ``kernels_dense`` and
``kernels_sparse`` (the allocation step and the compiled block of iterations of each path), ``driver``
(initialisation, burn-in, thinning, progress, chains). The Gamma and Dirichlet kernels live in
:mod:`vcmc.dirichlet`, shared with the rest of the library. Every kernel is compiled with numba's on-disk
cache; a change to a helper in another module is not seen by the cache of its callers (numba checks only
the caller's file): clear ``__pycache__`` after editing one (CONTRIBUTING.md).
"""

from vcmc.dirichlet import draw_dirichlet
from vcmc.mcmc.sampler.draws import conditional_draws, log_joint
from vcmc.mcmc.sampler.driver import ChainDraws, KeptBlock, kept_iterations, local_prior, run_chain, sample_chains

__all__ = ["ChainDraws", "KeptBlock", "conditional_draws", "draw_dirichlet", "kept_iterations", "local_prior",
           "log_joint", "run_chain", "sample_chains"]
