"""DP-SGD forecasting: window samplers, models with per-example gradients, trainer, metrics."""
