"""The shared core: configurations, the parent-child contract and the results schema.

Every other package may import it; it imports none of them, and never torch (the reports
and the parent stay free of heavy imports).
"""
