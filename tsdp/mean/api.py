"""The former name of :mod:`tsdp.mean.estimation` (issue 28: one name per concept, ``api`` is
:mod:`tsdp.api.means`). Kept only so that importers not yet moved (the report verifier) keep working:
``tsdp.mean.api`` IS that module. Import :mod:`tsdp.mean.estimation`."""

import sys

from tsdp.mean import estimation

sys.modules[__name__] = estimation
