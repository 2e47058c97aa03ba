"""The pooled model's blocked Gibbs sampler across the silos, the part that is a function of the pooled sums
alone (docs/design.md §16): ``gibbs`` (the weights and profiles given the summed counts, their alignment, the
collapsed log joint) and ``chain`` (the rounds' bookkeeping: which draws are kept, the stopping rule, the
answer). Every silo runs it on the sums it computes itself, so nobody else chooses what a silo uses; pure
functions of arrays and seeds, no message.
"""
