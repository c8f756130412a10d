"""Verification of a privacy report: is its claim the one its own mechanism, unit and noise give?

``verify_report(data)`` rechecks a parsed, schema-valid ``tsdp-report/1`` document and returns a
:class:`ReportVerification`: a list of named checks, each passed or failed with a one-line detail.
Nothing is printed and no file is read; the caller passes the sha256 of the released file when it
has one (:func:`tsdp.io.files.sha256_file`).

What a passing verification proves. The claim is internally consistent and follows from public
figures by the mechanism's own theorem, recomputed here independently of the figures the report
states:

* the definition is the one the mechanism can give (Gaussian or mixture noise is never pure DP; a
  LIP claim (FLIP) carries no epsilon, no delta and no events, and nothing else is LIP);
* the unit is well formed for the mechanism, its description is the one its bounds give, and the
  sensitivities follow from it and the released grid (M, I, K, w, n_series, n_steps:
  :class:`tsdp.accounting.sensitivity.ContributionBounds`);
* the mechanism events are exactly those the unit and the stated noise give (kind, sensitivity,
  count, mixture), and the parameters (sigma, scale, sensitivities, samples) agree with them, so no
  single figure can be edited alone;
* epsilon and delta are recomputed: from the events (:func:`tsdp.accounting.compose.events_privacy`)
  for every mechanism that emits them, which must carry them; from the parameters otherwise
  (Laplace DFT, Koga et al.'s paper accounting, user-level means, DP-SGD through
  :mod:`tsdp.accounting.structured` exactly as the trainer accounts);
* a LIP claim states the same-date LIP floor its released dates were held to (``--lip-floor``, or by
  default min(1 - ``--lip-delta``, 0.99); a stated floor above it fails), in figures and in words;
* the bound is an upper bound, the numbers are within the given budget, the run was not seeded,
  and the released file is the one the report names (its sha256; a report whose released file is
  not given fails, unless the caller asks for the claim alone: ``output_check=False``).

What it cannot prove: who wrote the report (a report edited consistently in every figure, or
written by hand, verifies: sign or store reports where they cannot be altered); that the released
file was produced with the stated noise (only its hash is compared); anything about the private
data (FLIP's per-date LIP is such a figure: verify checks the floor the command held the dates to, not
the LIP values, which are in the custodian file); and whether declared contribution bounds held for pre-aggregated input (``enforced: false``).
For the conditional filter-subsample accounting the per-series spectral norms s_J, and for the
paper filter accounting the kernel statistics (L, srank), are taken from the report: they depend on
the released sampling pattern or the kernel, and are only checked for range and consistency.
"""

from tsdp.verify.checks import (check_thresholds, claim_checks, publication_checks, shape_columns,
                                verify_report)
from tsdp.verify.parts import REL_TOL, Check, ReportVerification
from tsdp.verify.rules import RULES

__all__ = ["REL_TOL", "RULES", "Check", "ReportVerification", "check_thresholds", "claim_checks",
           "publication_checks", "shape_columns", "verify_report"]
