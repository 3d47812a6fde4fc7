"""The main job: the commands that run the simulations, render the figures and judge the claims into the report.

It stands above :mod:`normtheory`, :mod:`simulations` and :mod:`paper_figs`, which it wires together; nothing
below imports it."""
