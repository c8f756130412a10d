"""Verification of reports by the same privacy maps the releases used (DESIGN.md section 1)."""
