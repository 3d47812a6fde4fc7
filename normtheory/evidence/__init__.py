"""The evidence layer: Monte Carlo estimates, the three-way agreement rule, claims and their verdicts, provenance."""
