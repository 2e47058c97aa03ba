"""A test Flower app: the vcmc ClientApp as deployed, and a ServerApp that probes one catalogue case at a time."""
