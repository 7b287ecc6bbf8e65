"""Ground sound (Qu & James 2019, "Ground sound"): the floor's own emission under an impact, from an elastic
half-space. :mod:`.lamb`: Lamb's problem (step and regularized surface response, any Poisson ratio);
:mod:`.impact`: contact parameters, surface motion of one impact, Rayleigh radiation on the axis. The source kind
that renders it in scenes is not registered yet."""
