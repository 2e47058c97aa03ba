"""vcmc.silo"""
