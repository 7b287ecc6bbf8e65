"""Granular sound (M. Marko, "Sound simulation of granular materials"): the acceleration noise of colliding grains
(:mod:`.pulse`)."""
