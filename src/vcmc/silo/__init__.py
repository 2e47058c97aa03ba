"""The silo's boundary: ``LocalSilo`` (the one entry point), the gate (the rules every request shares), the
operator's ``SiloPolicy`` and one endpoint per request family (its admission rule, answer and release rule).
The computation it calls on the silo's rows is ``vcmc.mcmc`` and ``vcmc.rows``."""
