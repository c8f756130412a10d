"""The rule of each mechanism a report may name, by its name."""

from __future__ import annotations


from tsdp.forecast.claim import MECHANISM as DPSGD_MECHANISM
from tsdp.verify.flip import _flip
from tsdp.verify.forecast import _dpsgd
from tsdp.verify.mean import _mean
from tsdp.verify.parts import FLIP_MECHANISM, MEAN_ALGORITHMS, _Rule
from tsdp.verify.release import _dft, _fast, _gaussian, _laplace
from tsdp.verify.subsampling import _filter_subsample, _subsample


RULES: dict[str, _Rule] = {
    "gaussian": _Rule("Gaussian mechanism on the panel (L2 sensitivity of the unit)", _gaussian),
    "laplace": _Rule("Laplace mechanism on the panel (L1 sensitivity of the unit)", _laplace),
    "dft": _Rule("first k Fourier coefficients with Gaussian or Laplace noise (Rastogi and Nath)", _dft),
    "fast": _Rule("FAST: at most c = min(M, steps the unit touches) noisy samples per series (Fan and Xiong)", _fast),
    "subsample": _Rule("time subsampling with Gaussian noise (Koga et al.; exact or paper accounting)", _subsample),
    "filter-subsample": _Rule("filtered time subsampling (Koga et al.; conditional or paper accounting)",
                              _filter_subsample),
    DPSGD_MECHANISM: _Rule("DP-SGD, recomputed with tsdp.accounting.structured", _dpsgd),
    FLIP_MECHANISM: _Rule("FLIP: LIP only, never differential privacy", _flip),
    **{f"user-level-mean/{a}": _Rule("user-level means, basic composition over the groups", _mean)
       for a in MEAN_ALGORITHMS},
}


def _rule_for(mechanism: str) -> _Rule | None:
    return RULES.get(mechanism)


def _stream_rule(report) -> _Rule | None:
    """tsdp stream's reports (issue 32): their rule lives in :mod:`tsdp.verify.stream`."""
    from tsdp.verify import stream

    return _Rule(stream.DESCRIBES, stream.check) if stream.is_stream_report(report.data) else None
