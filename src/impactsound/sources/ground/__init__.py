"""Ground sound (Qu & James 2019, "Ground sound"): the floor's own emission under an impact, from an elastic
half-space (Lamb's problem). In progress: the surface response of the half-space (:mod:`.lamb`)."""
