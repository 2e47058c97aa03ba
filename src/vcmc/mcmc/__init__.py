"""The apply step: the fractionated Gibbs sampler of one silo's rows and its post-processing.

``sampler`` (numba kernels and the driver), ``relabel`` (online pivot relabelling), ``postprocess`` (the
local partition and the label-consistent draws of the local clusters), ``convergence`` and ``diagnostics``
(R-hat, ESS, stopping by convergence), ``posterior`` (``LocalPosterior``, what the apply step leaves in the
silo) and ``apply`` (the step itself, ``run_apply_step``). Plain functions of arrays: the silo's boundary
(``vcmc.silo``), the pooled reference (full-data MCMC) and the estimator call them; nothing here knows a
message type or the gate.
"""
