"""vcmc.data"""
