"""Bounds of symbolic dimension expressions, the decision procedure behind comparisons,
``max_dim``/``min_dim`` and ``InconclusiveDimensionOperation`` (JAX's elimination
procedure, so that the same comparisons are decided the same way).

An expression here is its terms, ``((monomial, coeff), ...)`` sorted largest first by
JAX's syntactic order (size, then factors); the last term is the constant. Facts are
``e >= 0`` or ``e == 0``: the user's constraints, and for each term met the implicit
ones (a variable ``>= 1``; ``0 <= mod(a, b) < b``; ``a == b*floordiv(a, b) + mod(a, b)``;
``min(a, b) <= a, b``; ``max(a, b) >= a, b``; a product within its factors' bounds).
A fact is kept under its leading term; the bounds of ``e`` eliminate ``e``'s leading
term with each fact that has it and recurse on the smaller rest, and a leading
``max``/``min`` is also bounded by substituting each operand. Incomplete (an SMT solver
is the road not taken: too slow for tracing) but sound; kept per scope with a cache.
"""
import functools
import itertools
import math

import numpy as np

INF = np.inf


class InconclusiveDimensionOperation(Exception):
    """A comparison or operation on symbolic dimensions whose result depends on the
    dimension variables' values."""


GEQ0_OR_LEQ0, GEQ0_OR_LT0, BEST = 0, 1, 2   # how precise the caller needs the bounds


def _enough(prec, lo, hi):
    if prec == GEQ0_OR_LEQ0:
        return lo >= 0 or hi <= 0
    return prec == GEQ0_OR_LT0 and (lo >= 0 or hi < 0)


# ---- JAX's syntactic order: by size, then lexicographic (variables by name) ----

@functools.lru_cache(maxsize=8192)
def factor_key(f):
    if isinstance(f, str):
        return (1, f)
    a, b = (expr_key(x.terms()) for x in f[2:])
    return (1 + a[0] + b[0], f[1], a, b)


@functools.lru_cache(maxsize=8192)
def mon_key(mon):
    """Key of a monomial ``((factor, power), ...)`` (its factors sorted by key)."""
    fs = [(factor_key(f), p) for f, p in reversed(mon)]
    return (sum(1 + p * k[0] for k, p in fs), tuple(fs))


def expr_key(terms):
    if not terms:
        return (1, ((mon_key(()), 0),))
    ks = [(mon_key(m), c) for m, c in terms]
    return (sum(1 + abs(c) * k[0] for k, c in ks), tuple(ks))


def sort_terms(pairs):
    """Terms in normal order (largest first), zero coefficients dropped."""
    return tuple(sorted(((m, c) for m, c in pairs if c), key=lambda mc: mon_key(mc[0]),
                        reverse=True))


def mon_mul(m1, m2):
    powers = dict(m1)
    for f, p in m2:
        powers[f] = powers.get(f, 0) + p
    return tuple(sorted(((f, p) for f, p in powers.items() if p),
                        key=lambda fp: factor_key(fp[0])))


def _lin(e1, k1, e2, k2, rules=None):
    """``e1*k1 + e2*k2`` of terms (normalized by the equality ``rules`` if given)."""
    acc = {}
    for e, k in ((e1, k1), (e2, k2)):
        for m, c in e:
            acc[m] = acc.get(m, 0) + c * k
    return normalize(sort_terms(acc.items()), rules)


def normalize(terms, rules):
    """Apply the first equality rule ``mon*k == e`` that matches (as JAX)."""
    for m, c in terms if rules else ():
        e, k = rules.get(m, (None, 0))
        if e is not None and c % k == 0:
            return _lin(tuple((t, tc) for t, tc in terms if t != m), 1, e, c // k)
    return terms


def _terms(x):
    return x if isinstance(x, tuple) else ((((), int(x)),) if x else ())


def _const(e):
    if not e:
        return 0
    return e[0][1] if e[0][0] == () else None


def _single(e):
    """``(n, k, t)`` where ``e == n + k*t`` for one non-constant term ``t``, else None."""
    rest = [mc for mc in e if mc[0] != ()]
    return (e[-1][1] if e[-1][0] == () else 0, rest[0][1], rest[0][0]) \
        if len(rest) == 1 else None


def _sgn(x):
    return 1 if x >= 0 else -1


class Context:
    """Per scope: the state after the explicit constraints, and a bounds cache."""

    def __init__(self, constraints=(), rules=None):
        self.constraints, self.rules = constraints, rules   # [(is_eq, terms)]
        self.cache, self._initial = {}, None

    def bounds(self, e, prec=BEST):
        """``(lower, upper)`` of the terms ``e`` (``+-inf`` where unknown)."""
        if (c := _const(e)) is not None:
            return c, c
        hit = self.cache.get(e)
        if hit is not None and (_enough(prec, *hit[:2]) or hit[2] >= prec):
            return hit[:2]
        if self._initial is None:
            self._initial = _State(self)
            for is_eq, diff in self.constraints:
                self._initial.implicit_expr(diff)
                self._initial.add(is_eq, diff, 0)
                self.cache.clear()
        return self._initial.copy().bounds(e, prec, implicit=True)


class _State:
    def __init__(self, ctx):
        self.ctx, self.done = ctx, set()
        self.term_bounds = {}   # term -> (lo, hi)
        self.by_lead = {}       # leading term -> {(is_eq, terms)}: facts with that lead

    def copy(self):
        c = _State(self.ctx)
        c.done, c.term_bounds = set(self.done), dict(self.term_bounds)
        c.by_lead = {t: set(s) for t, s in self.by_lead.items()}
        return c

    def add(self, is_eq, e1, e2):
        """Add the fact ``e1 - e2 (== | >=) 0`` and its eliminations with known facts."""
        if any(isinstance(x, float) and np.isinf(x) for x in (e1, e2)):
            return   # a bound at infinity: no fact
        e = e1 if isinstance(e1, tuple) and isinstance(e2, int) and e2 == 0 else \
            _lin(_terms(e1), 1, _terms(e2), -1, self.ctx.rules)   # (e - 0 stays, as JAX)
        if (c := _const(e)) is not None:
            if c < 0:
                raise ValueError(f"Unsatisfiable constraint: {e1} >= {e2}")
            return
        self._store(is_eq, e)
        combined = set()
        for t, t_k in e:
            if t == ():
                continue
            for c_eq, c, c_s, t_s in self._facts_with(t, t_k, only_lead=False):
                if t_s > 0 or is_eq:
                    new = _lin(e, t_s, c, c_s, self.ctx.rules)
                    if (k := _const(new)) is None:
                        combined.add((is_eq and c_eq, new))
                    elif k < 0 or (is_eq and c_eq and k != 0):
                        raise ValueError(f"Unsatisfiable constraints: {e} >= 0")
        for c_eq, new in combined:
            self._store(c_eq, new)

    def _store(self, is_eq, e):
        if (single := _single(e)) is not None:   # n + k*t: a bound of t
            n, k, t = single
            lo, hi = self.term_bounds.get(t, (-INF, INF))
            if is_eq:
                if n % k:
                    raise ValueError(f"Unsatisfiable constraint: {e} == 0")
                lo, hi = max(lo, -(n // k)), min(hi, -(n // k))
            elif k > 0:
                lo = max(lo, -(n // k))          # ceil(-n / k)
            else:
                hi = min(hi, n // -k)            # floor(-n / k)
            if lo > hi:
                raise ValueError(f"Unsatisfiable constraint: {e} >= 0")
            self.term_bounds[t] = (lo, hi)
        else:
            self.by_lead.setdefault(e[0][0], set()).add((is_eq, e))

    def _facts_with(self, t, t_k, only_lead):
        """``(is_eq, c, c_s, t_s)``: facts ``c`` such that ``t*t_k*t_s + c*c_s`` has no
        ``t`` (with ``c_s > 0``)."""
        out, (lo, hi) = [], self.term_bounds.get(t, (-INF, INF))
        te = ((t, 1),)
        if lo == hi:
            out.append((True, _lin(te, 1, _terms(int(lo)), -1), abs(t_k), -_sgn(t_k)))
        else:
            if lo > -INF:
                out.append((False, _lin(te, 1, _terms(int(lo)), -1), abs(t_k), -_sgn(t_k)))
            if hi < INF:
                out.append((False, _lin(te, -1, _terms(int(hi)), 1), abs(t_k), _sgn(t_k)))
        groups = [self.by_lead.get(t, ())] if only_lead else self.by_lead.values()
        for group in groups:
            for c_eq, c in group:
                tc_k = dict(c).get(t)
                if tc_k is not None:
                    out.append((c_eq, c, abs(t_k), -tc_k * _sgn(t_k)))
        return out

    def bounds(self, e, prec, implicit=False):
        if (c := _const(e)) is not None:
            return c, c
        hit = self.ctx.cache.get(e)
        if hit is not None and (_enough(prec, *hit[:2]) or hit[2] >= prec):
            return hit[:2]
        if implicit:
            self.implicit_expr(e)
        lo, hi = self._sorted_bounds(e, prec)
        lo, hi = (int(lo) if lo > -INF else lo), (int(hi) if hi < INF else hi)
        self.ctx.cache[e] = (lo, hi, prec)
        return lo, hi

    def _sorted_bounds(self, e, prec):
        if not e:
            return 0, 0
        (t, t_k), lo, hi = e[0], -INF, INF
        if t == ():
            return t_k, t_k
        for c_eq, c, c_s, t_s in self._facts_with(t, t_k, only_lead=True):
            # e*t_s = rest - c*c_s, where rest has only terms smaller than t
            r_lo, r_hi = self._sorted_bounds(_lin(e, t_s, c, c_s), BEST)
            if r_hi < INF:
                if t_s > 0:
                    hi = min(hi, math.floor(r_hi / t_s))
                else:
                    lo = max(lo, math.ceil(r_hi / t_s))
            if r_lo > -INF and c_eq:
                if t_s > 0:
                    lo = max(lo, math.ceil(r_lo / t_s))
                else:
                    hi = min(hi, math.floor(r_lo / t_s))
            if _enough(prec, lo, hi):
                return lo, hi
        if len(t) == 1 and t[0][1] == 1 and not isinstance(t[0][0], str) \
                and t[0][0][1] in ("max", "min"):
            # k*max(a, b) + rest lies within max(k*a + rest, k*b + rest) for k > 0, ...
            op = t[0][0]
            (l1, h1), (l2, h2) = (self._sorted_bounds(_lin(e[1:], 1, x.terms(), t_k), BEST)
                                  for x in op[2:])
            pick = max if (t_k > 0) == (op[1] == "max") else min
            lo, hi = max(lo, pick(l1, l2)), min(hi, pick(h1, h2))
        return lo, hi

    def implicit_expr(self, e):
        for t, _ in e:
            if t != ():
                self._implicit_term(t)

    def _implicit_term(self, t):
        if t in self.done:
            return
        self.done.add(t)
        te = normalize(((t, 1),), self.ctx.rules)
        if len(t) != 1 or t[0][1] != 1:    # a product: within its factors' bounds
            ranges = []
            for f, p in t:
                self._implicit_term(((f, 1),))
                lo, hi = self.bounds((((((f, 1),)), 1),), BEST)
                ranges.append((_pow(lo, p), _pow(hi, p)))
            cands = [_prod(c) for c in itertools.product(*ranges)]
            self.add(False, te, min(cands))
            self.add(False, max(cands), te)
            return
        f = t[0][0]
        if isinstance(f, str):
            self.add(False, te, 1)
            return
        a, b = (x.terms() for x in f[2:])
        self.implicit_expr(a)
        self.implicit_expr(b)
        if f[1] == "mod":
            b_lo, b_hi = self.bounds(b, GEQ0_OR_LT0)
            if b_lo > 0:
                self.add(False, te, 0)
                self.add(False, _lin(b, 1, ((((), 1),)), -1), te)
                self.add(False, b_hi - 1, te)
            elif b_hi < 0:
                self.add(False, te, _lin(b, 1, ((((), 1),)), 1))
                self.add(False, te, b_lo + 1)
                self.add(False, 0, te)
        elif f[1] == "floordiv":
            (a_lo, a_hi), (b_lo, b_hi) = self.bounds(a, BEST), self.bounds(b, BEST)
            if b_lo <= 0 <= b_hi:
                raise InconclusiveDimensionOperation(
                    f"Possible division by 0 in division by {f[3]}")
            cands = [_floor(x, y) for x in (a_lo, a_hi) for y in (b_lo, b_hi)]
            self.add(False, te, min(cands))
            self.add(False, max(cands), te)
            if b_lo >= 0:
                if a_lo >= 0:
                    self.add(False, te, 0)
                mod = normalize((((((("op", "mod") + f[2:], 1),)), 1),), self.ctx.rules)
                self.implicit_expr(mod)
                self.add(True, a, _lin(_mul(b, te), 1, mod, 1))
        else:   # max / min: between the operands' bounds, and above / below each
            (a_lo, a_hi), (b_lo, b_hi) = self.bounds(a, BEST), self.bounds(b, BEST)
            pick = max if f[1] == "max" else min
            self.add(False, te, pick(a_lo, b_lo))
            self.add(False, pick(a_hi, b_hi), te)
            for x in (a, b):
                self.add(False, *((te, x) if f[1] == "max" else (x, te)))


def _pow(x, p):
    return x ** p if not (x == 0 and p == 0) else 1


def _prod(xs):
    return 0 if 0 in xs else math.prod(xs)   # 0 * inf is 0: the factor is exactly 0


def _floor(a, b):
    """``floor(a / b)``, the limit where ``a`` or ``b`` is infinite."""
    if not np.isinf(b):
        return math.floor(a / b) if not np.isinf(a) else (-INF if (a >= 0) != (b >= 0)
                                                          else INF)
    if not np.isinf(a):
        return -1 if (a >= 0) != (b >= 0) else 0
    return -INF if (a >= 0) != (b >= 0) else INF


def _mul(e1, e2):
    acc = {}
    for m1, c1 in e1:
        for m2, c2 in e2:
            m = mon_mul(m1, m2)
            acc[m] = acc.get(m, 0) + c1 * c2
    return sort_terms(acc.items())
