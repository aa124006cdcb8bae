"""Symbolic dimensions (``jax.export.symbolic_shape``): polynomials over dimension
variables, with ``floordiv``/``mod``/``max``/``min`` as opaque factors.

A ``_DimExpr`` is a sum of terms ``coeff * monomial``; a monomial is a sorted tuple of
``(factor, power)``, a factor a variable name or an operation ``(op, e1, e2)``. This
is the normal form JAX uses (terms largest first in its syntactic order), so equal
expressions compare and hash equal; comparisons are decided by ``shape_bounds`` (JAX's
procedure) or raise ``InconclusiveDimensionOperation``. Strings print and parse in
JAX's syntax, which is also the serialized form of a shape.
"""
import re

import numpy as np

from xform.core import shape_bounds
from xform.core.shape_bounds import InconclusiveDimensionOperation

_INCONCLUSIVE_HELP = """
This error arises for comparison operations with shapes that
are non-constant, and the result of the operation cannot be represented as
a boolean value for all values of the symbolic dimensions involved.

Please see https://docs.jax.dev/en/latest/export/shape_poly.html#comparison-of-symbolic-dimensions-is-partially-supported
for more details.
"""


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
        self._context = None    # shape_bounds.Context, built at the first decision
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
            f = mon[0][0] if len(mon) == 1 and mon[0][1] == 1 else None
            if k == 1 and e2 == 0 and not isinstance(f, (str, type(None))) \
                    and f[1] == "mod" and not is_symbolic_dim(f[3]._normal()):
                # mod(a, k) == 0 also gives k*floordiv(a, k) == a, as in JAX
                self._add(f"{f[3]}*floordiv({f[2]}, {f[3]}) == {f[2]}")
        self.constraints.append((text, "==" if op == "==" else ">=", diff))
        self._context = None

    def context(self):
        """The decision procedure's state for these constraints."""
        if self._context is None:
            self._context = shape_bounds.Context(
                [(op == "==", _lift(d).terms()) for _, op, d in self.constraints],
                {m: (_lift(e).terms(), k) for m, (e, k) in self.rules.items()})
        return self._context


def _add_terms(acc, terms, scale=1):
    for mon, c in terms:
        acc[mon] = acc.get(mon, 0) + c * scale
    return acc


class _DimExpr:
    __slots__ = ("_terms", "scope")

    def __init__(self, terms, scope=None):
        self._terms = shape_bounds.sort_terms(terms)
        self.scope = scope

    # -- construction --
    @staticmethod
    def var(name, scope=None):
        return _DimExpr((((((name, 1),)), 1),), scope)._normal()

    @staticmethod
    def op(name, a, b, scope=None):
        return _DimExpr(((((("op", name, _lift(a), _lift(b)), 1),), 1),), scope)._normal()

    def _normal(self):
        """An int where the expression is constant, else self (with the scope's
        equality rules applied: to a whole term, or as JAX to one factor of it)."""
        rules = self.scope.rules if self.scope is not None else None
        for m, c in self._terms if rules else ():
            for key, rest in [(m, ())] + [(((f, p),), tuple(fp for fp in m if fp[0] != f))
                                          for f, p in m if len(m) > 1]:
                e, k = rules.get(key, (None, 0))
                if e is not None and c % k == 0:
                    out = _DimExpr([mc for mc in self._terms if mc[0] != m], self.scope) + \
                        e * _DimExpr((((rest), c // k),), self.scope)
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
                mon = shape_bounds.mon_mul(m1, m2)
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
        lo, hi = _decide_bounds(diff, shape_bounds.GEQ0_OR_LT0)
        if lo >= 0:
            return True
        if hi < 0:
            return False
        scope = _scope(self, other)
        where = "".join(f"\n  {t}" for t in scope.constraints_str) if scope else ""
        where = where and f"\nUsing symbolic scope {id(scope)} with constraints:{where}"
        raise _inconclusive(f"Symbolic dimension comparison '{_s(self)}' {op} '{_s(other)}'"
                            f" is inconclusive.{where}")

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

    __index__ = __int__   # (no __bool__: a dimension is truthy, as in JAX)

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
        for mon, c in self._terms:
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


def _decide_bounds(e, prec=shape_bounds.BEST):
    """``(lower, upper)`` of a dimension, from its scope's decision procedure."""
    if not isinstance(e, _DimExpr):
        return int(e), int(e)
    ctx = e.scope.context() if e.scope is not None else _NO_CONSTRAINTS
    return ctx.bounds(e._terms, prec)


_NO_CONSTRAINTS = shape_bounds.Context()


def _s(x):
    return str(x)


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


def _divmod(a, b):
    """``(a // b, a % b)`` by JAX's polynomial long division (leading terms first):
    exact where it leaves a constant remainder (0 for a symbolic divisor; any for a
    constant one, as ``(2*b + 3) // 2 == b + 1``), else opaque ``floordiv``/``mod``."""
    a, b = _lift(a)._normal(), _lift(b)._normal()
    if b == 0:
        raise _inconclusive(f"Symbolic dimension '{a}' divided by 0")
    if not is_symbolic_dim(a) and not is_symbolic_dim(b):
        return divmod(a, b)
    rest, quot = a, 0
    while is_symbolic_dim(rest):
        (mon, c) = rest._terms[0]
        dmon, dc = b._terms[0] if is_symbolic_dim(b) else ((), b)
        powers = dict(mon)
        if c % dc or any(powers.get(f, 0) < p for f, p in dmon):
            break
        q = _DimExpr(((tuple((f, p - dict(dmon).get(f, 0)) for f, p in mon
                             if p != dict(dmon).get(f, 0)), c // dc),), a.scope)._normal()
        quot, rest = quot + q, rest - q * b
    else:
        if not is_symbolic_dim(b):
            return quot + rest // b, rest % b
        if rest == 0:
            return quot, 0
    scope = _scope(a, b)
    return _DimExpr.op("floordiv", a, b, scope), _DimExpr.op("mod", a, b, scope)


def max_dim(a, b):
    """``max`` of dimensions (``core.max_dim``): symbolic unless the bounds of ``a - b``
    decide it (``>= 0`` gives ``a``, ``<= 0`` gives ``b``, as JAX)."""
    if not (is_symbolic_dim(a) or is_symbolic_dim(b)):
        return max(a, b)
    lo, hi = _decide_bounds(a - b, shape_bounds.GEQ0_OR_LEQ0)
    return a if lo >= 0 else b if hi <= 0 else _DimExpr.op("max", a, b, _scope(a, b))


def min_dim(a, b):
    """``min`` of dimensions (``core.min_dim``)."""
    if not (is_symbolic_dim(a) or is_symbolic_dim(b)):
        return min(a, b)
    lo, hi = _decide_bounds(a - b, shape_bounds.GEQ0_OR_LEQ0)
    return b if lo >= 0 else a if hi <= 0 else _DimExpr.op("min", a, b, _scope(a, b))


def canonicalize_slice(s, n):
    """``(start, step, size)`` of slice ``s`` (static entries, possibly symbolic) of an
    axis of size ``n``, as JAX's ``core.canonicalize_slice``: start and stop clamped,
    signs decided statically, ``size = max(0, distance + gap - 1) // gap``."""
    step = 1 if s.step is None else s.step
    if step == 0:
        raise ValueError("slice step cannot be zero")
    try:
        up = step > 0
    except InconclusiveDimensionOperation as e:
        raise _inconclusive(f"In slice with non-constant elements the step ({step}) must "
                            f"be resolved statically if it is > 0 or < 0.\nDetails: {e}")

    def clamp(i, which):
        try:
            nonneg = i >= 0
        except InconclusiveDimensionOperation as e:
            raise _inconclusive(f"In slice with non-constant elements the {which} ({i}) "
                                f"must be resolved statically if it is >= 0.\nDetails: {e}")
        if nonneg:
            return min_dim(n, i) if up else min_dim(n - 1, i)
        return max_dim(0, n + i) if up else max_dim(-1, n + i)
    start = (0 if up else n - 1) if s.start is None else clamp(s.start, "start")
    stop = (n if up else -1) if s.stop is None else clamp(s.stop, "stop")
    gap = step if up else -step
    return start, step, max_dim(0, (stop - start if up else start - stop) + gap - 1) // gap


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
