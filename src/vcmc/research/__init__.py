"""The research harness: everything that exists to evaluate the method rather than to run it.

``simulate`` (the paper's designs), ``ehr`` (the application's synthetic cohort, its tables as package data),
``baselines`` (the comparators: full-data MCMC, FedMerDel, federated K-modes, DisCGS), ``study`` (the
simulation studies, their tables and figures) and ``datasets`` (real data shipped for examples). The
library core (``vcmc.config``, ``vcmc.data``, ``vcmc.silo``, ``vcmc.matching``, ``vcmc.aggregation``,
``vcmc.pipeline``, ...) never imports this package; the method registry (``vcmc.methods``) names the
comparators by module path, and the CLI's ``simulate`` and ``study`` commands are its only other users
(docs/design.md §12.6, CONTRIBUTING.md "Layout").
"""
