"""Pieces of benchmarks/rounds_probe.py: a Gibbs kernel with a Dirichlet prior per component, the round
designs of the agreement issue (cavity rounds, cavity rounds with splits, pooled-statistic rounds) and the
server's decisions made from sums over silos only."""
