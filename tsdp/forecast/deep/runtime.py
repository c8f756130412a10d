"""How the deep models run JAX on the CPU: computations inline, and freed temporaries kept by the C allocator.

XLA:CPU allocates the temporary buffers of every call afresh and frees them when it returns: about 120 MB
for a DeepAR step at batch 256 (the LSTM's saved activations and gate derivatives of 71 positions). glibc's
malloc serves a block that large by ``mmap`` (it is above the mmap threshold, at most 32 MB when left
dynamic, and, from the worker threads of JAX's asynchronous dispatch, above the 64 MB of a thread arena)
and unmaps it when it is freed, so every step faults ~30,000 fresh pages in again. In this project's
virtual machines a page fault costs about 4 us (``bench/forecast_deep.py`` measures it), ~110 ms a step:
more than the step's arithmetic. Two process-wide settings, made once before JAX creates its CPU client,
remove it:

* ``jax_cpu_enable_async_dispatch`` False: CPU computations run on the calling thread (every training
  step waits for its result anyway), so their buffers come from glibc's main arena;
* ``mallopt(M_MMAP_THRESHOLD, 1 GiB)`` and ``mallopt(M_TRIM_THRESHOLD, 1 GiB)``: blocks below 1 GiB come
  from the heap, and up to 1 GiB of freed heap is kept for the next call instead of being returned to the
  kernel (the process's resident size stays at its peak meanwhile).

Nothing is changed where the C library is not glibc, or when ``JAX_CPU_ENABLE_ASYNC_DISPATCH`` is set in
the environment (the user's choice), and the dispatch setting is left alone once JAX's backends exist.
Results do not depend on either setting; only the time does.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

M_TRIM_THRESHOLD = -1  # glibc's mallopt parameter numbers (malloc.h)
M_MMAP_THRESHOLD = -3
KEEP_BYTES = 1 << 30
_done = False


def configure() -> None:
    """Apply the settings above once per process (before the first JAX backend is created)."""
    global _done
    if _done:
        return
    _done = True
    if "JAX_CPU_ENABLE_ASYNC_DISPATCH" in os.environ:
        return
    import jax
    from jax._src import xla_bridge

    if not xla_bridge.backends_are_initialized():
        jax.config.update("jax_cpu_enable_async_dispatch", False)
    mallopt = _glibc_mallopt()
    if mallopt is not None:
        mallopt(M_MMAP_THRESHOLD, KEEP_BYTES)
        mallopt(M_TRIM_THRESHOLD, KEEP_BYTES)


def _glibc_mallopt():
    """glibc's ``mallopt`` (None elsewhere: musl, macOS, Windows)."""
    name = ctypes.util.find_library("c")
    if not name or "libc.so" not in name:
        return None
    try:
        libc = ctypes.CDLL(name)
        if not libc.gnu_get_libc_version:
            return None
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return None
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return mallopt
