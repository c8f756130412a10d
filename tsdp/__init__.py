"""tsdp: differentially private release of time series."""
__version__ = "0.1.0"
