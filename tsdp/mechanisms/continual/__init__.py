"""Continual release of growing series with correlated noise: matrix factorizations A = B C.

A stream fixes its public parameters once (:class:`StreamSetting`), is charged once, and then
publishes, step by step, each requested output (``daily``, ``cumulative``, ``window:k``) as
``B_i (C x + z)`` with ``B_i C = A_i`` (:mod:`.workloads`). Strategies (:mod:`.toeplitz`,
:mod:`.tree`): ``independent`` (C = I), ``tree`` (binary tree, least-squares decoding),
``toeplitz`` (square root of the prefix-sum matrix), ``banded`` (its first ``band`` diagonals: O(band)
state per series). Sensitivities by unit (event, w-event, user with at most I participations and an
optional min-separation, K series per unit jointly) are in :mod:`.sensitivity`.

API (all pure functions of public parameters, except the release which also reads the data and
the stream's secret):

* ``choose(strategy="auto", horizon=..., epsilon=..., delta=..., unit=..., w=..., max_per_step=...,
  max_steps=..., min_separation=..., series_per_user=..., n_series=..., outputs=..., sampler=...)
  -> (StreamSetting, table)``: resolves ``auto`` (smallest error on the requested outputs relative
  to independent noise, independent always a candidate); the table has one row per candidate.
* ``privacy_map(setting) -> StreamPrivacy``: sigma, s(C), Delta, lattice, events, theorem;
  ``.claim(id_column, enforced)`` builds the :class:`~tsdp.accounting.claim.PrivacyClaim`.
* ``accuracy(setting, alpha) -> {output: {"sd": (T,), "half_width": (T,)}}`` and
  ``summary(setting, alpha) -> {output: {"rmse", "final_sd", "half_width_rms"}}``.
* ``new_carry(setting)`` and ``release_steps(setting, secret, carry, x, start) -> (outputs, carry)``:
  ``x`` is (n_series, k) for steps start..start+k-1; outputs maps each output to (n_series, k);
  the carry is a dict of numpy arrays for ``np.savez``. Noise is keyed by (secret, step).

``Definition`` (:mod:`.definition`) is a stream's public definition as its reports record it.

What the caller owns: enforcing the declared bounds on x (M per step, I participations, the
min-separation, K series), keeping the secret and the carry private (custodian state), and the
option names of the command line (the core's messages name the setting's fields).
"""

from tsdp.mechanisms.continual.accuracy import accuracy, choose, summary
from tsdp.mechanisms.continual.definition import Definition
from tsdp.mechanisms.continual.privacy import StreamPrivacy, privacy_map
from tsdp.mechanisms.continual.release import new_carry, release_steps
from tsdp.mechanisms.continual.setting import STRATEGIES, StreamSetting

__all__ = ["Definition", "STRATEGIES", "StreamPrivacy", "StreamSetting", "accuracy", "choose", "new_carry", "privacy_map",
           "release_steps", "summary"]
