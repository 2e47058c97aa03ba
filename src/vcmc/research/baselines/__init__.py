"""vcmc.research.baselines"""
