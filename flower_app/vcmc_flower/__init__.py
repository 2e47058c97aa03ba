"""vcmc Flower app: thin shims over the installed ``vcmc`` library (``vcmc.federation.flower``)."""
