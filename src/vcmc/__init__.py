"""vcmc: federated Bayesian clustering of categorical data by Variational Consensus Monte Carlo."""

__version__ = "0.1.0"
