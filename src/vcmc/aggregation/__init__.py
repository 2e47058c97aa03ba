"""vcmc.aggregation"""
