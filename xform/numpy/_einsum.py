"""einsum and einsum_path: Einstein summation as a sequence of pairwise
``dot_general`` contractions.

Each operand first loses its repeated labels (diagonals) and the labels no one else
needs (summed out); then pairs are contracted along a path, greedily by default: at
each step the pair whose result is smallest. Labels shared by the pair and still needed
later become dot_general batch dimensions, the others are contracted.
"""
import itertools
import math
import operator
import string


from xform import lax
from xform.core import shape_poly
from xform.interpreters.composite import composite
from xform.core.sharding_types import abstract_sharding, result_resharded
from xform.lax.sharding_constraint import reshard
from xform.numpy import _util
from xform.numpy._matrix import diagonal
from xform.numpy._products import _general

_LETTERS = string.ascii_letters


def _sublist_to_str(sub):
    out = []
    for s in sub:
        if s is Ellipsis:
            out.append("...")
        else:
            s = operator.index(s)
            if not 0 <= s < len(_LETTERS):
                raise ValueError(f"einsum: subscript {s} is out of range [0, 52)")
            out.append(_LETTERS[s])
    return "".join(out)


def _interleaved(args):
    """``einsum(op0, sub0, op1, sub1, ..., [out])`` to a subscripts string."""
    args = list(args)
    out = args.pop() if len(args) % 2 else None
    ops, subs = args[0::2], args[1::2]
    spec = ",".join(_sublist_to_str(s) for s in subs)
    if out is not None:
        spec += "->" + _sublist_to_str(out)
    return spec, ops


def _parse(subscripts, shapes):
    """Labels per operand and for the output, with each ``...`` expanded to fresh
    labels (right-aligned across operands, as NumPy broadcasts them)."""
    spec = subscripts.replace(" ", "")
    if "->" in spec:
        lhs, out = spec.split("->")
        explicit = True
    else:
        lhs, out, explicit = spec, "", False
    ins = lhs.split(",")
    if len(ins) != len(shapes):
        raise ValueError(f"einsum: {len(ins)} operand subscripts in {subscripts!r} but "
                         f"{len(shapes)} operands were given")
    used = set(c for c in spec if c.isalpha())
    for c in spec:
        if not (c.isalpha() or c in ".,->"):
            raise ValueError(f"einsum: invalid subscript character {c!r} in {subscripts!r}")
    fresh = [c for c in _LETTERS if c not in used]
    n_ell = 0
    for term, shape in zip(ins, shapes):
        if "..." in term:
            n_ell = max(n_ell, len(shape) - (len(term) - 3))
    ell = "".join(fresh[:n_ell])
    labels = []
    for k, (term, shape) in enumerate(zip(ins, shapes)):
        if "..." in term:
            n = len(shape) - (len(term) - 3)
            if n < 0:
                raise ValueError(f"einsum: operand {k} has {len(shape)} dimensions, fewer "
                                 f"than its subscripts {term!r}")
            term = term.replace("...", ell[n_ell - n:])
        if len(term) != len(shape):
            raise ValueError(f"einsum: operand {k} has shape {shape} but subscripts "
                             f"{term!r} name {len(term)} dimensions")
        labels.append(term)
    if explicit:
        out = out.replace("...", ell)
        for c in out:
            if not any(c in t for t in labels):
                raise ValueError(f"einsum: output subscript {c!r} does not appear in the "
                                 "inputs")
    else:
        counts = {}
        for t in labels:
            for c in t:
                counts[c] = counts.get(c, 0) + 1
        out = ell + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell))
    return labels, out


def _sizes(ops, labels):
    """Label sizes; operands' size-1 dimensions that broadcast against a larger size
    are squeezed out (then that operand simply lacks the label)."""
    sizes = {}
    for x, lab in zip(ops, labels):
        for c, d in zip(lab, x.aval.shape):
            if sizes.get(c, 1) == 1:
                sizes[c] = d
            elif d not in (1, sizes[c]):
                raise ValueError(f"einsum: size of label {c!r} is {sizes[c]} in one operand "
                                 f"and {d} in another")
    new_ops, new_labels = [], []
    for x, lab in zip(ops, labels):
        drop = tuple(i for i, c in enumerate(lab) if x.aval.shape[i] == 1 and sizes[c] != 1)
        if drop:
            x = lax.squeeze(x, drop)
            lab = "".join(c for i, c in enumerate(lab) if i not in drop)
        new_ops.append(x)
        new_labels.append(lab)
    return new_ops, new_labels, sizes


def _cost_size(d):
    """A size for path costs: a symbolic dimension counts as 8 (only the order of
    contractions depends on it)."""
    return 8 if shape_poly.is_symbolic_dim(d) else int(d)


def _greedy_path(labels, out, sizes):
    labels = list(labels)
    path = []
    while len(labels) > 1:
        best = None
        for i, j in itertools.combinations(range(len(labels)), 2):
            keep = _result_labels(labels, i, j, out)
            cost = math.prod(_cost_size(sizes[c]) for c in keep)
            if best is None or cost < best[0]:
                best = (cost, i, j, keep)
        _, i, j, keep = best
        path.append((i, j))
        labels = [t for k, t in enumerate(labels) if k not in (i, j)] + [keep]
    return path


def _optimal_path(labels, out, sizes):
    """The pairwise order of fewest FLOPs, searched depth first (opt_einsum's "optimal",
    which JAX's einsum takes for up to four operands, so the products round alike): a
    pair costs the size of its labels' union, twice that when it contracts a label, and
    of equal totals the first found is kept. Positions as :func:`einsum` takes them."""
    out_set = frozenset(out)
    best = [math.inf, ()]
    pairs = {}   # (labels of i, labels of j) -> (result labels, cost), first seen kept

    def search(path, sets, remaining, flops):
        if len(remaining) == 1:
            best[:] = [flops, path]
            return
        for i, j in itertools.combinations(sorted(remaining), 2):
            k12, cost = pairs.get((sets[i], sets[j])) or pairs.setdefault(
                (sets[i], sets[j]), _pair_cost(sets, remaining, i, j, out_set, sizes))
            if flops + cost < best[0]:
                search(path + ((i, j),), sets + (k12,), remaining - {i, j} | {len(sets)},
                       flops + cost)

    search((), tuple(map(frozenset, labels)), frozenset(range(len(labels))), 0)
    ids, linear = list(range(len(labels))), []
    for i, j in best[1]:   # (ids of results to positions in the shrinking operand list)
        linear.append((ids.index(i), ids.index(j)))
        ids = [k for k in ids if k != i and k != j] + [len(labels) + len(linear) - 1]
    return linear


def _pair_cost(sets, remaining, i, j, out_set, sizes):
    either = sets[i] | sets[j]
    keep = out_set.union(*(sets[k] for k in remaining if k != i and k != j))
    inner = (sets[i] & sets[j]) - keep
    return either & keep, math.prod(_cost_size(sizes[c]) for c in either) * (2 if inner else 1)


def _result_labels(labels, i, j, out):
    others = set(out).union(*(t for k, t in enumerate(labels) if k not in (i, j)))
    a, b = labels[i], labels[j]
    batch = [c for c in a if c in b and c in others]
    return "".join(batch + [c for c in a + b if c not in batch and c in others])


def _path(optimize, labels, out, sizes):
    if optimize is False or optimize is None or len(labels) < 2:
        return [(0, 1)] * (len(labels) - 1)
    if isinstance(optimize, (list, tuple)):
        path = [tuple(p) for p in optimize if p != "einsum_path"]
        if any(len(p) != 2 for p in path) or len(path) != len(labels) - 1:
            raise ValueError(f"einsum: optimize path {optimize} must be {len(labels) - 1} "
                             "pairs of operand positions")
        return path
    if optimize is True or optimize == "optimal" or (
            optimize in ("auto", "dp", "branch-2") and len(labels) <= 4):
        return _optimal_path(labels, out, sizes)
    if optimize in ("greedy", "auto", "dp", "branch-2"):
        return _greedy_path(labels, out, sizes)
    raise ValueError(f"einsum: optimize={optimize!r} is not one of False, True, 'greedy', "
                     "'optimal', 'auto' or a contraction path")


def _remove_repeats(x, lab):
    while True:
        dup = next((c for c in lab if lab.count(c) > 1), None)
        if dup is None:
            return x, lab
        p = lab.index(dup)
        q = lab.index(dup, p + 1)
        x = diagonal(x, 0, p, q)
        lab = "".join(c for k, c in enumerate(lab) if k not in (p, q)) + dup


def _sum_unneeded(x, lab, needed):
    axes = tuple(k for k, c in enumerate(lab) if c not in needed)
    if not axes:
        return x, lab
    return lax.reduce_sum(x, axes), "".join(c for c in lab if c in needed)


def _prepare(subscripts, operands, promote=True):
    # (promote=False: with a preferred_element_type, JAX contracts mixed dtypes as they
    # are, e.g. float8_e4m3fn x float8_e5m2 -> float32)
    if not isinstance(subscripts, str):
        subscripts, operands = _interleaved((subscripts,) + tuple(operands))
    _util.check_arraylike("einsum", *operands)
    ops = (_util.promote_dtypes("einsum", *operands) if promote else
           [_util.asarray(x, "einsum", i) for i, x in enumerate(operands)])
    labels, out = _parse(subscripts, [x.aval.shape for x in ops])
    ops, labels, sizes = _sizes(ops, labels)
    return ops, labels, out, sizes


def einsum(subscripts, /, *operands, out=None, optimize="auto", precision=None,
           preferred_element_type=None, out_sharding=None, _dot_general=None):
    """Like numpy.einsum (see :func:`_einsum`); ``out_sharding`` (a NamedSharding, or a
    PartitionSpec under a mesh) lays the result out so (its type, in explicit mode).
    ``_dot_general`` (JAX's private hook; Flax's ``Fp8Einsum`` passes its fp8 one)
    replaces ``lax.dot_general`` for the pairwise contractions.

    >>> jnp.einsum("ij,j->i", jnp.ones((2, 3)), jnp.arange(3.0))
    Array([3., 3.], dtype=float32)
    """
    if _dot_general is not None:  # (a traced-through call: the hook may close over arrays)
        if out_sharding is not None:
            raise NotImplementedError("einsum: out_sharding with a _dot_general hook")
        return _einsum.__wrapped__(subscripts, *operands, out=out, optimize=optimize,
                                   precision=precision, _dot_general=_dot_general,
                                   preferred_element_type=preferred_element_type)
    if out_sharding is None:
        return _einsum(subscripts, *operands, out=out, optimize=optimize,
                       precision=precision, preferred_element_type=preferred_element_type)
    abstract_sharding(out_sharding, "einsum")  # (JAX's error for Auto axes)
    with result_resharded():  # (an ambiguous contraction's type is the reshard's)
        r = _einsum(subscripts, *operands, out=out, optimize=optimize, precision=precision,
                    preferred_element_type=preferred_element_type)
    return reshard(r, out_sharding)


@composite(static=("subscripts", "out", "optimize", "precision", "preferred_element_type"))
def _einsum(subscripts, /, *operands, out=None, optimize="auto", precision=None,
            preferred_element_type=None, _dot_general=None):
    """Einstein summation over the operands' labelled axes.

    Args:
      subscripts: e.g. ``"ij,jk->ik"`` (``...`` broadcasts; without ``->`` the output
        is the labels used once, sorted), or the interleaved form ``einsum(x, [0, 1],
        y, [1, 2], [0, 2])``.
      *operands: the arrays.
      optimize: the contraction order: ``False`` (left to right), ``True``/"optimal"
        (fewest FLOPs; "auto" too for up to four operands, as JAX's), "greedy" (and
        "auto" beyond four: smallest intermediate first), or a path as returned by
        :func:`einsum_path`.
      precision, preferred_element_type: passed to ``lax.dot_general``.

    Returns:
      The contraction, with the operands' promoted dtype.

    >>> jnp.einsum("ij,j->i", jnp.ones((2, 3)), jnp.arange(3.0))
    Array([3., 3.], dtype=float32)
    """
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.einsum is not supported.")
    ops, labels, out_labels, sizes = _prepare(subscripts, operands,
                                              promote=preferred_element_type is None)
    path = _path(optimize, labels, out_labels, sizes)
    ops, labels = list(ops), list(labels)
    for k in range(len(ops)):
        ops[k], labels[k] = _remove_repeats(ops[k], labels[k])
    for n, (i, j) in enumerate(path):
        if not (0 <= i < len(ops) and 0 <= j < len(ops)) or i == j:
            raise ValueError(f"einsum: invalid contraction {(i, j)} for {len(ops)} operands")
        rest = [t for k, t in enumerate(labels) if k not in (i, j)]
        others = set(out_labels).union(*rest)
        hi, lo = max(i, j), min(i, j)   # (JAX's lhs is the later operand)
        lhs, ll = _sum_unneeded(ops[hi], labels[hi], others | set(labels[lo]))
        rhs, rl = _sum_unneeded(ops[lo], labels[lo], others | set(ll))
        # the result's label order: the output's, or opt_einsum's (first use in lhs, rhs)
        result = out_labels if n == len(path) - 1 else "".join(
            sorted({c for c in ll + rl if c in others}, key=(ll + rl).find))
        r, lab = _contract(lhs, ll, rhs, rl, result, others, precision,
                           preferred_element_type, _dot_general)
        ops = [y for k, y in enumerate(ops) if k not in (i, j)] + [r]
        labels = rest + [lab]
    x, lab = _sum_unneeded(ops[0], labels[0], set(out_labels))
    x = lax.transpose(x, tuple(lab.index(c) for c in out_labels))
    if preferred_element_type is not None:
        x = lax.convert_element_type(x, _util.user_dtype(preferred_element_type))
    return x


def _contract(lhs, ll, rhs, rl, result, others, precision, preferred_element_type,
              dot_general):
    """One pairwise contraction as JAX's einsum writes it (so XLA sees the same dot and
    rounds alike): contracted labels sorted, batch labels in the result's order, the
    operands swapped when that gives the result's order, else a transpose after. A user
    ``dot_general`` hook gets the operands' dtype as the default result type."""
    contract = sorted(c for c in ll if c in rl and c not in others)
    batch = [c for c in result if c in ll and c in rl]
    free_l = [c for c in ll if c not in batch and c not in contract]
    free_r = [c for c in rl if c not in batch and c not in contract]
    names = "".join(batch + free_r + free_l)
    if names == result:
        (a, la), (b, lb) = (rhs, rl), (lhs, ll)
    else:
        (a, la), (b, lb) = (lhs, ll), (rhs, rl)
        names = "".join(batch + free_l + free_r)
    dims = ((tuple(la.index(c) for c in contract), tuple(lb.index(c) for c in contract)),
            (tuple(la.index(c) for c in batch), tuple(lb.index(c) for c in batch)))
    if dot_general is None:
        x = _general(a, b, *dims, precision=precision,
                     preferred_element_type=preferred_element_type)
    else:
        x = dot_general(a, b, dims, precision, preferred_element_type=(
            a.aval.dtype if preferred_element_type is None else preferred_element_type))
    if names != result:
        x = lax.transpose(x, tuple(names.index(c) for c in result))
    return x, result


def einsum_path(subscripts, /, *operands, optimize="auto"):
    """Like JAX's (opt_einsum's) einsum_path: the pairwise contraction order
    :func:`einsum` would use, and a short description.

    Returns:
      ``(path, description)``: ``path`` is a list of position pairs (each contracted
      pair's result is appended at the end of the operand list), usable as
      ``einsum(..., optimize=path)``.

    >>> jnp.einsum_path("ij,jk,kl->il", jnp.ones((2, 3)), jnp.ones((3, 4)),
    ...                 jnp.ones((4, 1)))[0]
    [(1, 2), (0, 1)]
    """
    _, labels, out, sizes = _prepare(subscripts, operands)
    path = _path(optimize if optimize is not None else False, labels, out, sizes)
    desc = (f"  Complete contraction:  {','.join(labels)}->{out}\n"
            f"  Contraction path: {path}")
    return path, desc
