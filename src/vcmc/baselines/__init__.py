"""vcmc.baselines"""
