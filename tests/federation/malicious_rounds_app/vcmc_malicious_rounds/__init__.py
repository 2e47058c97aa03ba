"""A test Flower app: the vcmc ClientApp as deployed, and a malicious ServerApp attacking the rounds against it."""
