"""Bounding and aggregation: from an input table to the panel a mechanism protects."""
