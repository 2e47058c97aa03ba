"""What a silo computes on its rows at given parameters: plain functions of arrays, apart from the boundary.

``memberships`` (each row's memberships of the global clusters and their cluster-level sums), ``counts``
(soft and hard count tables), ``ppc`` (predictive checks, WAIC and occupancy sums), ``divergence``
(minimum-divergence costs), ``births`` (the rows worst explained by their cluster), ``rounds`` (the silo's
row-level state of the global-informed rounds), ``lca`` (the latent class analysis' sums) and ``row_kernels``
(their compiled loops). The silo's endpoints (``vcmc.silo.endpoints``) call them and wrap what they return
into replies; nothing here knows a message type or the gate.
"""
