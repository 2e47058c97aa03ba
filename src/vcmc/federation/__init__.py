"""vcmc.federation"""
