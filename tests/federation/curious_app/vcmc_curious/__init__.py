"""A test Flower app: the vcmc ClientApp as deployed, and a curious ServerApp running attacks against it."""
