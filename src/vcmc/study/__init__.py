"""vcmc.study"""
