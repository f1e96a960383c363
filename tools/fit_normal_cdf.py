#!/usr/bin/python3
"""Fits the approximation of the normal CDF Phi(x) that shaders/common.glsl uses for the exact
GELU, x * Phi(x) (GLSL has no erf), and reports its accuracy in float32.

The form, for q(x) = Phi(-|x|) = erfc(|x| / sqrt 2) / 2 (then Phi(x) = q for x < 0, 1 - q else):

    t = 1 / (1 + C |x|),    q = t/2 * exp(-x^2 / 2) * exp(P(t - T0))

P is a polynomial fitted to log(erfc(a) exp(a^2) / t), a = |x| / sqrt 2, a smooth function of t on
(0, 1]: it tends to log(C sqrt(2 / pi)) as |x| grows, so one polynomial serves the whole range and
the result keeps its relative accuracy in the far negative tail, where 1 + erf(x / sqrt 2) would
cancel.  The fit interpolates at Chebyshev nodes of t over |x| in [0, 14] (beyond, q underflows
float32).  exp(-x^2 / 2) is taken in two parts, x^2 split into an exact high product and a small
remainder, because rounding x^2 to float32 alone would cost 1e-5 of relative accuracy at |x| = 10.

Usage: /usr/bin/python3 tools/fit_normal_cdf.py   (NumPy only; prints the constants and errors)
"""

import math

import numpy as np

C = 0.75 / math.sqrt(2.0)   # t = 1 / (1 + 0.75 a): a spread of t that keeps P's coefficients below 1
DEGREE = 10
X_MAX = 14.0


def log_scaled_erfc(t):
    """log(erfc(a) exp(a^2) / t) for t = 1 / (1 + C sqrt(2) a), in double."""
    a = (1.0 / t - 1.0) / (C * math.sqrt(2.0))
    scaled = math.erfc(a) * math.exp(a * a)  # fine in double for a <= 10
    return math.log(scaled / t)


def fit():
    t_lo = 1.0 / (1.0 + C * X_MAX)
    n = 400
    nodes = t_lo + (1.0 - t_lo) * (0.5 + 0.5 * np.cos(np.pi * (np.arange(n) + 0.5) / n))
    cheb = np.polynomial.chebyshev.Chebyshev.fit(nodes, [log_scaled_erfc(t) for t in nodes], DEGREE,
                                                 domain=[t_lo, 1.0])
    t0 = 0.5 * (1.0 + t_lo)
    mono = cheb.convert(kind=np.polynomial.Polynomial, domain=[-1, 1], window=[-1, 1])
    shifted = mono(np.polynomial.Polynomial([t0, 1.0]))  # P as a polynomial in w = t - t0
    return t0, t_lo, shifted.coef


def phi_float32(x, t0, coef):
    """The shader's arithmetic, step for step, in float32."""
    f = np.float32
    x = x.astype(f)
    ax = np.abs(x)
    t = f(1) / (f(1) + f(C) * ax)
    w = t - f(t0)
    p = f(coef[-1])
    for c in coef[-2::-1]:
        p = p * w + f(c)
    hi = (ax.view(np.uint32) & np.uint32(0xFFFFF000)).view(f)  # 12 significant bits: hi * hi is exact
    lo = ax - hi
    q = f(0.5) * t * np.exp(f(-0.5) * hi * hi) * np.exp(p - f(0.5) * lo * (ax + hi))
    q = np.where(ax < f(X_MAX), q, f(0))
    return np.where(x < 0, q, f(1) - q)


def main():
    t0, t_lo, coef = fit()
    grid = np.linspace(t_lo, 1.0, 20001)
    formula = max(abs(np.polyval(coef[::-1], t - t0) - log_scaled_erfc(t)) for t in grid)
    rng = np.random.default_rng(1)
    xs = np.concatenate([np.linspace(-12.5, 13.0, 400001), rng.standard_normal(200000) * 3.0,
                         np.linspace(-0.1, 0.1, 100001)]).astype(np.float32)
    xd = xs.astype(np.float64)
    truth = np.array([0.5 * math.erfc(-v / math.sqrt(2.0)) for v in xd])
    rel = np.abs(phi_float32(xs, t0, coef).astype(np.float64) - truth) / truth
    print(f"C = {C!r}\nT0 = {t0!r}\ncoefficients of P(w), w = t - T0, constant first:")
    for c in coef:
        print(f"    {c:.17g}")
    print(f"formula (double): max relative error of q {formula:.2e}")
    print(f"float32 evaluation, x in [-12.5, 13]: max relative error {rel.max():.2e}, mean {rel.mean():.2e}")


if __name__ == "__main__":
    main()
