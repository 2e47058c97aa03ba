"""vcmc.matching"""
