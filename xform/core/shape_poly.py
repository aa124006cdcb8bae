"""Symbolic dimensions (``jax.export.symbolic_shape``): polynomials over dimension
variables, with ``floordiv``/``mod``/``max``/``min`` as opaque factors.

A ``_DimExpr`` is a sum of terms ``coeff * monomial``; a monomial is a sorted tuple of
``(factor, power)``, a factor a variable name or an operation ``(op, e1, e2)``. This
is the normal form JAX uses, so equal expressions compare and hash equal; comparisons
are decided from bounds (every variable is >= 1) or raise
``InconclusiveDimensionOperation``. Strings print and parse in JAX's syntax, which is
also the serialized form of a shape.
"""
import re

import numpy as np

_INCONCLUSIVE_HELP = """
This error arises for comparison operations with shapes that
are non-constant, and the result of the operation cannot be represented as
a boolean value for all values of the symbolic dimensions involved.

Please see https://docs.jax.dev/en/latest/export/shape_poly.html#comparison-of-symbolic-dimensions-is-partially-supported
for more details.
"""


class InconclusiveDimensionOperation(Exception):
    """A comparison or operation on symbolic dimensions whose result depends on the
    dimension variables' values."""


def _inconclusive(msg):
    return InconclusiveDimensionOperation(msg + "\n" + _INCONCLUSIVE_HELP)


class SymbolicScope:
    """Dimension variables that may be combined, and the constraints among them:
    ``e1 >= e2`` / ``e1 <= e2`` decide comparisons (with the variables' bound
    ``>= 1``), ``t*k == e`` rewrites the term ``t*k`` to ``e`` as JAX normalizes.
    Identity is the scope (as JAX's); constraints are checked when called."""

    def __init__(self, constraints_str=()):
        if isinstance(constraints_str, str):
            raise ValueError("The symbolic constraints should be a sequence of strings. "
                             f"Got {constraints_str!r}")
        self.constraints_str = tuple(constraints_str)
        self.rules = {}         # monomial -> (expression, coefficient)
        self.constraints = []   # (debug_str, "==" or ">=", e1 - e2)
        for c in self.constraints_str:
            self._add(c)

    def _add(self, text):
        if not isinstance(text, str):
            raise ValueError(f"SymbolicScope constraint must be a string: got {text!r}")
        for op in ("==", ">=", "<="):
            if op in text:
                break
        else:
            raise ValueError("Constraint parsing error: must contain one of '==' or '>=' "
                             "or '<='")
        lhs, rhs = text.split(op, 1)
        (e1,), (e2,) = (_Parser(t, self).shape() for t in (lhs, rhs))
        if op == "<=":
            e1, e2 = e2, e1
        diff = e1 - e2
        if not isinstance(diff, _DimExpr):
            if diff < 0 or (op == "==" and diff != 0):
                raise ValueError(f"Unsatisfiable explicit constraint: {text}")
            return
        if op == "==":
            if not isinstance(e1, _DimExpr) or len(e1._terms) != 1:
                raise ValueError(f"Invalid equality constraint: {e1} == {e2}. The "
                                 "left-hand-side must be of the form `term * coefficient`.")
            (mon, k), = e1._terms
            if mon in self.rules:
                raise NotImplementedError("Found multiple equality constraints with the "
                                          f"same left-hand-side: {_DimExpr(((mon, 1),))}")
            self.rules[mon] = (e2, k)
        self.constraints.append((text, "==" if op == "==" else ">=", diff))

    def nonnegative(self):
        """Expressions known ``>= 0`` (an equality gives both signs)."""
        return [d for _, op, d in self.constraints] + [
            -d for _, op, d in self.constraints if op == "=="]


def _add_terms(acc, terms, scale=1):
    for mon, c in terms:
        acc[mon] = acc.get(mon, 0) + c * scale
    return acc


class _DimExpr:
    __slots__ = ("_terms", "scope")

    def __init__(self, terms, scope=None):
        self._terms = tuple(sorted(((m, c) for m, c in terms if c != 0), key=_mon_key))
        self.scope = scope

    # -- construction --
    @staticmethod
    def var(name, scope=None):
        return _DimExpr((((((name, 1),)), 1),), scope)._normal()

    @staticmethod
    def op(name, a, b, scope=None):
        return _DimExpr(((((("op", name, _lift(a), _lift(b)), 1),), 1),), scope)

    def _normal(self):
        """An int where the expression is constant, else self (with the scope's
        equality rules applied)."""
        rules = self.scope.rules if self.scope is not None else None
        if rules and any(m in rules and c % rules[m][1] == 0 for m, c in self._terms):
            out = _DimExpr((), self.scope)
            for m, c in self._terms:
                e, k = rules.get(m, (None, 0))
                out = out + (e * (c // k) if e is not None and c % k == 0 else
                             _DimExpr(((m, c),), self.scope))
            return out if isinstance(out, int) else out._normal()
        if not self._terms:
            return 0
        if len(self._terms) == 1 and self._terms[0][0] == ():
            return self._terms[0][1]
        return self

    # -- arithmetic --
    def __add__(self, other):
        if not _is_dim(other):
            return NotImplemented
        acc = _add_terms(_add_terms({}, self._terms), _lift(other)._terms)
        return _DimExpr(acc.items(), _scope(self, other))._normal()

    __radd__ = __add__

    def __neg__(self):
        return _DimExpr([(m, -c) for m, c in self._terms], self.scope)._normal()

    def __sub__(self, other):
        return self + (-_lift(other)) if _is_dim(other) else NotImplemented

    def __rsub__(self, other):
        return _lift(other) + (-self) if _is_dim(other) else NotImplemented

    def __mul__(self, other):
        if not _is_dim(other):
            return NotImplemented
        acc = {}
        for m1, c1 in self._terms:
            for m2, c2 in _lift(other)._terms:
                powers = dict(m1)
                for f, p in m2:
                    powers[f] = powers.get(f, 0) + p
                mon = tuple(sorted(powers.items(), key=lambda fp: _factor_key(fp[0])))
                acc[mon] = acc.get(mon, 0) + c1 * c2
        return _DimExpr(acc.items(), _scope(self, other))._normal()

    __rmul__ = __mul__

    def __floordiv__(self, other):
        if not _is_dim(other):
            return NotImplemented
        return _divmod(self, other)[0]

    def __rfloordiv__(self, other):
        return _divmod(other, self)[0] if _is_dim(other) else NotImplemented

    def __mod__(self, other):
        return _divmod(self, other)[1] if _is_dim(other) else NotImplemented

    def __rmod__(self, other):
        return _divmod(other, self)[1] if _is_dim(other) else NotImplemented

    def __divmod__(self, other):
        return _divmod(self, other)

    # -- comparisons (decided from bounds) --
    def __eq__(self, other):
        if not _is_dim(other):
            return False
        return self._terms == _lift(other)._terms

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return hash(self._terms)

    def _decide(self, diff, op, other):
        """``diff >= 0`` where the bounds decide it; the message shows ``self op other``."""
        lo, hi = _scoped_bounds(diff)
        if lo >= 0:
            return True
        if hi < 0:
            return False
        raise _inconclusive(f"Symbolic dimension comparison '{_s(self)}' {op} "
                            f"'{_s(other)}' is inconclusive.")

    def __ge__(self, other):
        return self._decide(self - other, ">=", other) if _is_dim(other) else NotImplemented

    def __gt__(self, other):
        return self._decide(self - other - 1, ">", other) if _is_dim(other) else NotImplemented

    def __le__(self, other):
        return self._decide(other - self, "<=", other) if _is_dim(other) else NotImplemented

    def __lt__(self, other):
        return self._decide(other - self - 1, "<", other) if _is_dim(other) else NotImplemented

    def __int__(self):
        raise _inconclusive(f"Symbolic dimension '{self}' used in a context that "
                            "requires a constant")

    __index__ = __int__

    def __bool__(self):
        raise _inconclusive(f"Symbolic dimension '{self}' used in a context that "
                            "requires a constant")

    def terms(self):
        """``(monomial, coefficient)`` pairs; a monomial is ``((factor, power), ...)``
        with a factor a variable name or ``("op", name, e1, e2)``."""
        return self._terms

    # -- evaluation --
    def evaluate(self, env):
        """The value with the variables bound in ``env`` (name -> int)."""
        total = 0
        for mon, c in self._terms:
            v = c
            for f, p in mon:
                v *= _eval_factor(f, env) ** p
            total += v
        return total

    def variables(self):
        out = set()
        for mon, _ in self._terms:
            for f, _ in mon:
                if isinstance(f, str):
                    out.add(f)
                else:
                    for e in f[2:]:
                        out |= e.variables() if isinstance(e, _DimExpr) else set()
        return out

    def __str__(self):
        parts = []
        for mon, c in sorted(self._terms, key=_mon_key, reverse=True):
            body = "*".join(_factor_str(f) + (f"^{p}" if p > 1 else "") for f, p in mon)
            if not body:
                term = str(abs(c))
            else:
                term = body if abs(c) == 1 else f"{abs(c)}*{body}"
            parts.append(("- " if c < 0 else ("+ " if parts else "")) + term)
        return " ".join(parts) if parts else "0"

    __repr__ = __str__


def _is_dim(x):
    return isinstance(x, (int, np.integer, _DimExpr)) and not isinstance(x, bool)


def _lift(x, scope=None):
    return x if isinstance(x, _DimExpr) else _DimExpr((((), int(x)),), scope)


def _scope(*xs):
    return next((x.scope for x in xs if isinstance(x, _DimExpr) and x.scope), None)


def _scoped_bounds(e):
    """``_bounds`` tightened by facts known ``>= 0``: the scope's constraints and, as
    JAX's decision procedure, ``0 <= mod(a, b) <= b - 1`` and ``b*floordiv(a, b) <= a <=
    b*floordiv(a, b) + b - 1`` for the factors in ``e``. With ``c >= 0`` known,
    ``e >= lo(e - c)`` and ``e <= hi(e + c)``; sums of two facts give the transitive
    cases (``a >= b, b >= 3`` decide ``a >= 3``)."""
    lo, hi = _bounds(e)
    if lo >= 0 or hi < 0 or not isinstance(e, _DimExpr):
        return lo, hi
    scope = e.scope
    known = scope.nonnegative() if scope is not None else []
    for f in {f for mon, _ in e._terms for f, _ in mon if not isinstance(f, str)}:
        fe, (a, b) = _DimExpr((((((f, 1),)), 1),), scope), f[2:]
        if f[1] == "mod" and _bounds(b)[0] > 0:
            known += [fe, b - 1 - fe]
        elif f[1] == "floordiv" and _bounds(b)[0] > 0:
            known += [a - b * fe, b * fe + b - 1 - a]
    sums = known + [c1 + c2 for i, c1 in enumerate(known) for c2 in known[i + 1:]]
    for c in sums:
        lo, hi = max(lo, _bounds(e - c)[0]), min(hi, _bounds(e + c)[1])
    return lo, hi


def _s(x):
    return str(x)


def _factor_key(f):
    return (0, f) if isinstance(f, str) else (1, f[1], str(f[2]), str(f[3]))


def _mon_key(mc):
    mon = mc[0]
    return (len(mon), [(_factor_key(f), p) for f, p in mon])


def _factor_str(f):
    if isinstance(f, str):
        return f
    return f"{f[1]}({f[2]}, {f[3]})"


def _eval_factor(f, env):
    if isinstance(f, str):
        if f not in env:
            raise KeyError(f)
        return int(env[f])
    a, b = (e.evaluate(env) if isinstance(e, _DimExpr) else int(e) for e in f[2:])
    return {"floordiv": lambda: a // b, "mod": lambda: a % b,
            "max": lambda: max(a, b), "min": lambda: min(a, b)}[f[1]]()


def _bounds(e):
    """(lower, upper) bounds of ``e`` over variables >= 1 (inf where unknown)."""
    if not isinstance(e, _DimExpr):
        return e, e
    lo = hi = 0
    for mon, c in e._terms:
        mlo, mhi = 1, 1
        for f, p in mon:
            flo, fhi = _factor_bounds(f)
            mlo, mhi = mlo * flo ** p, mhi * fhi ** p
        lo, hi = (lo + c * mlo, hi + c * mhi) if c > 0 else (lo + c * mhi, hi + c * mlo)
    return lo, hi


def _factor_bounds(f):
    if isinstance(f, str):
        return 1, np.inf
    (alo, ahi), (blo, bhi) = _bounds(f[2]), _bounds(f[3])
    if f[1] == "max":
        return max(alo, blo), max(ahi, bhi)
    if f[1] == "min":
        return min(alo, blo), min(ahi, bhi)
    if f[1] == "mod" and blo > 0:
        return 0, bhi - 1
    if f[1] == "floordiv" and blo > 0 and alo >= 0:
        return alo // bhi if bhi != np.inf else 0, ahi // blo if ahi != np.inf else np.inf
    return -np.inf, np.inf


def _divmod(a, b):
    """``(a // b, a % b)``: exact where ``b`` divides ``a``'s terms, else opaque."""
    a, b = _lift(a), _lift(b)
    bn = b._normal()
    if isinstance(bn, int):
        if bn == 0:
            raise _inconclusive(f"Symbolic dimension '{a}' divided by 0")
        if all(c % bn == 0 for _, c in a._terms):
            return _DimExpr([(m, c // bn) for m, c in a._terms], a.scope)._normal(), 0
    an = a._normal()
    if isinstance(an, int) and isinstance(bn, int):
        return an // bn, an % bn
    if len(b._terms) == 1:  # exact where the monomial divides every term: 4*b // 2*b
        (bmon, bc), = b._terms
        quot = []
        for mon, c in a._terms:
            powers = dict(mon)
            if c % bc or any(powers.get(f, 0) < p for f, p in bmon):
                break
            for f, p in bmon:
                powers[f] -= p
            quot.append((tuple((f, p) for f, p in powers.items() if p), c // bc))
        else:
            return _DimExpr(quot, a.scope)._normal(), 0
    scope = a.scope or b.scope
    return _DimExpr.op("floordiv", a, b, scope), _DimExpr.op("mod", a, b, scope)


def _ge(a, b):
    """``a >= b`` where the bounds decide it, else None."""
    try:
        return _lift(a) >= _lift(b)
    except InconclusiveDimensionOperation:
        return None


def max_dim(a, b):
    """``max`` of dimensions (``core.max_dim``): symbolic unless decidable."""
    ge = _ge(a, b)
    if ge is None:
        ge = None if _ge(b, a) is None else not _ge(b, a)
    return _DimExpr.op("max", a, b, _scope(a, b)) if ge is None else (a if ge else b)


def min_dim(a, b):
    """``min`` of dimensions (``core.min_dim``)."""
    le = _ge(b, a)
    if le is None:
        le = None if _ge(a, b) is None else not _ge(a, b)
    return _DimExpr.op("min", a, b, _scope(a, b)) if le is None else (a if le else b)


def is_symbolic_dim(d):
    return isinstance(d, _DimExpr)


def is_constant_shape(shape):
    return not any(is_symbolic_dim(d) for d in shape)


# ---- parsing (JAX's syntax: "b, 2*n", "floordiv(a, 2) + 1", "max(a, b)", "a^2") ----

_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_][A-Za-z0-9_]*)|(//|[-+*%^(),]))")


class _Parser:
    def __init__(self, text, scope):
        self.text, self.scope, self.pos = text, scope, 0
        self.toks = []
        while True:
            m = _TOKEN.match(text, self.pos)
            if not m:
                if text[self.pos:].strip():
                    self.error(f"unexpected '{text[self.pos:].strip()}'")
                break
            self.pos = m.end()
            num, name, sym = m.groups()
            self.toks.append(int(num) if num is not None else (name or sym))
        self.i = 0

    def error(self, why):
        raise ValueError(f"syntax error in symbolic shape '{self.text}': {why}")

    def peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, tok=None):
        t = self.peek()
        if tok is not None and t != tok:
            self.error(f"expected '{tok}', found {t!r}")
        self.i += 1
        return t

    def shape(self):
        dims = []
        if self.peek() == "(":   # "(b, n)" as well as "b, n"
            self.take("(")
            closing = True
        else:
            closing = False
        while self.peek() not in (None, ")"):
            dims.append(self.expr())
            if self.peek() == ",":
                self.take(",")
        if closing:
            self.take(")")
        if self.peek() is not None:
            self.error(f"unexpected {self.peek()!r}")
        return tuple(dims)

    def expr(self):
        neg = self.peek() == "-" and self.take("-")
        e = self.term()
        e = -e if neg else e
        while self.peek() in ("+", "-"):
            op = self.take()
            t = self.term()
            e = e + t if op == "+" else e - t
        return e

    def term(self):
        e = self.power()
        while self.peek() in ("*", "//", "%"):
            op = self.take()
            f = self.power()
            e = e * f if op == "*" else (e // f if op == "//" else e % f)
        return e

    def power(self):
        e = self.atom()
        if self.peek() == "^":
            self.take("^")
            p = self.take()
            if not isinstance(p, int):
                self.error("exponent must be an integer")
            e = _pow(e, p)
        return e

    def atom(self):
        t = self.take()
        if isinstance(t, int):
            return t
        if t == "(":
            e = self.expr()
            self.take(")")
            return e
        if t in ("floordiv", "mod", "max", "min", "non_negative") and self.peek() == "(":
            self.take("(")
            a = self.expr()
            if t == "non_negative":
                self.take(")")
                return max_dim(a, 0)
            self.take(",")
            b = self.expr()
            self.take(")")
            return {"floordiv": lambda: a // b, "mod": lambda: a % b,
                    "max": lambda: max_dim(a, b), "min": lambda: min_dim(a, b)}[t]()
        if isinstance(t, str) and (t[0].isalpha() or t[0] == "_"):
            return _DimExpr.var(t, self.scope)
        self.error(f"unexpected {t!r}")


def _pow(e, p):
    out = 1
    for _ in range(p):
        out = out * e
    return out


def symbolic_shape(shape_spec, *, constraints=(), scope=None, like=None):
    """A tuple of dimensions from a string such as ``"b, 2*n"`` (ints stay ints).

    ``like`` (a concrete shape) fills ``_`` placeholders; ``constraints`` start a new
    ``SymbolicScope`` (they may not be given together with ``scope``)."""
    if scope is not None and constraints:
        raise ValueError("Cannot specify both a `scope` and `constraints`.")
    scope = scope if scope is not None else SymbolicScope(constraints)
    if shape_spec is None:
        shape_spec = "..."
    if not isinstance(shape_spec, str):
        raise ValueError(f"polymorphic shape spec should be a string. Found {shape_spec!r}.")
    dims = _Parser(shape_spec.replace("...", ",".join("_" * len(like or ()))),
                   scope).shape()
    if like is not None:
        if len(like) != len(dims):
            raise ValueError(f"polymorphic shape {shape_spec!r} has {len(dims)} "
                             f"dimensions, the argument has shape {tuple(like)}")
        dims = tuple(int(d) if _is_placeholder(s) else s for s, d in zip(dims, like))
    return dims


def _is_placeholder(d):
    return isinstance(d, _DimExpr) and d.variables() == {"_"} and d._terms[0][1] == 1
