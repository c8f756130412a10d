"""The names of DeepAR's output heads, which :mod:`tsdp.forecast.deep.distributions` builds: a module of
their own, so that the package (option checks, without JAX) and the heads read them without importing
each other."""

DISTRIBUTIONS = ("studentt", "negbin", "poisson")
COUNT_DISTRIBUTIONS = ("negbin", "poisson")  # the heads for counts (non-negative integer targets)
