"""vcmc.report"""
