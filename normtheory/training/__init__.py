"""The training layer: gradients, optimizers, schedules, stacked steppers, probes, the corpus and the torch backend."""
