"""ITMS-like **surrogate** per-user record counts (spec ``mean.md`` 3.2, generator recipe [D]).

NOT the real ITMS counts, which are not public. Found by the spec's recipe (round(LogNormal(ln 46,
s)) clipped to [1, 417], one user forced to 417, total adjusted to 17166; search seed 1 of a
targeted variant of :func:`tsdp.mean.synthetic.synth_itms_counts` with L in [190, 260), s in
[0.8, 1.4)), accepted because it reproduces every published ITMS statistic:
L = 233 (unpublished; >= 164 as required), m_max = 417, sum = 17166, ceil(L/2)-th largest = 46,
Eq. (1) cap m_UB = 64, BESTFIT K-bar = 164 and WRAPAROUND K = 160 at that cap.
"""

ITMS_SURROGATE_COUNTS = (
    51, 108, 9, 18, 50, 22, 50, 17, 142, 16, 66, 26, 66, 416, 37, 65, 49, 31, 77, 77, 29, 50,
    38, 164, 64, 70, 169, 246, 259, 309, 56, 6, 38, 12, 55, 28, 30, 28, 50, 241, 32, 7, 89, 50,
    133, 95, 158, 49, 237, 23, 62, 31, 150, 266, 55, 147, 44, 28, 48, 37, 23, 50, 12, 64, 21,
    43, 65, 52, 95, 34, 22, 7, 42, 62, 359, 60, 30, 28, 58, 33, 16, 76, 20, 33, 36, 51, 32, 21,
    32, 42, 50, 121, 58, 36, 147, 87, 56, 37, 81, 19, 30, 22, 35, 70, 41, 107, 140, 55, 44, 70,
    114, 58, 153, 17, 44, 32, 81, 143, 124, 138, 115, 37, 71, 87, 34, 151, 16, 44, 209, 38, 11,
    12, 25, 258, 156, 416, 17, 55, 64, 20, 32, 46, 20, 102, 22, 96, 36, 22, 22, 23, 26, 23, 60,
    39, 34, 57, 70, 99, 43, 111, 38, 43, 211, 12, 417, 37, 20, 9, 29, 32, 12, 37, 27, 78, 49,
    87, 25, 27, 11, 37, 45, 33, 43, 87, 35, 205, 206, 27, 18, 76, 13, 28, 81, 28, 77, 8, 38, 40,
    103, 28, 416, 2, 131, 54, 274, 55, 37, 122, 134, 238, 22, 291, 7, 18, 86, 32, 182, 55, 23,
    32, 22, 232, 47, 47, 97, 34, 101, 18, 70, 34, 35, 56, 81,
)
