"""The linear assignment problem (``optax.assignment``): two jittable Hungarian
algorithms returning ``(row_indices, col_indices)`` of a minimum-cost matching."""
import xform.numpy as jnp
from xform import lax

__all__ = ["base_hungarian_algorithm", "hungarian_algorithm"]


def _empty(cost_matrix):
    return cost_matrix.shape[0] == 0 or cost_matrix.shape[1] == 0


def base_hungarian_algorithm(cost_matrix):
    """Minimum-cost assignment of ``min(n, m)`` rows to columns of an ``n x m`` cost
    matrix by shortest augmenting paths (Crouse 2016, the algorithm of SciPy's
    ``linear_sum_assignment``).

    Returns:
        ``(row_indices, col_indices)``: row ``row_indices[k]`` goes to column
        ``col_indices[k]``.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> rows, cols = optax.assignment.base_hungarian_algorithm(jnp.array([[4., 1.],
        ...                                                                [2., 5.]]))
        >>> rows.tolist(), cols.tolist()
        ([0, 1], [1, 0])
    """
    cost_matrix = jnp.asarray(cost_matrix)
    if _empty(cost_matrix):
        return jnp.zeros(0, int), jnp.zeros(0, int)
    transpose = cost_matrix.shape[1] < cost_matrix.shape[0]
    if transpose:
        cost_matrix = cost_matrix.T
    costs = cost_matrix.astype(float)
    n, m = costs.shape
    init = (jnp.zeros(n, costs.dtype), jnp.zeros(m, costs.dtype), jnp.full(m, -1),
            jnp.full(m, -1), jnp.full(n, -1))
    _, _, _, _, col4row = lax.fori_loop(0, n, lambda row, s: _augment_row(costs, row, *s), init)
    if transpose:
        order = col4row.argsort()
        return col4row[order], order
    return jnp.arange(n), col4row


def _augment_row(costs, current_row, u, v, path, row4col, col4row):
    # One row of the shortest-augmenting-path method: Dijkstra over reduced costs from
    # `current_row` to a free column, potential updates, then augmentation along `path`.
    n, m = costs.shape

    def scan_column(it, val):
        remaining, min_value, i, spc, path, lowest, index = val
        j = remaining[it]
        r = min_value + costs[i, j] - u[i] - v[j]
        path = path.at[j].set(jnp.where(r < spc[j], i, path[j]))
        spc = spc.at[j].min(r)
        index = jnp.where((spc[j] < lowest) | ((spc[j] == lowest) & (row4col[j] == -1)),
                          it, index)
        return remaining, min_value, i, spc, path, jnp.minimum(lowest, spc[j]), index

    def search_step(val):
        min_value, num_remaining, remaining, i, sr, sc, spc, path, sink = val
        sr = sr.at[i].set(True)
        remaining, _, _, spc, path, lowest, index = lax.fori_loop(
            0, num_remaining, scan_column,
            (remaining, min_value, i, spc, path, jnp.inf, -1))
        min_value = lowest
        sink = jnp.where(min_value == jnp.inf, -1, sink)
        # Move to the closest column: it is the sink if free, else continue from its row.
        j = remaining[index]
        free = row4col[j] == -1
        new = (remaining.at[index].set(remaining[num_remaining - 1]),
               jnp.where(free, j, sink), jnp.where(free, i, row4col[j]),
               sc.at[j].set(True), num_remaining - 1)
        old = (remaining, sink, i, sc, num_remaining)
        remaining, sink, i, sc, num_remaining = [jnp.where(sink == -1, a, b)
                                                 for a, b in zip(new, old)]
        return min_value, num_remaining, remaining, i, sr, sc, spc, path, sink

    init = (0., m, jnp.arange(m)[::-1], current_row, jnp.zeros(n, bool), jnp.zeros(m, bool),
            jnp.full(m, jnp.inf), path, -1)
    min_value, _, _, _, sr, sc, spc, path, sink = lax.while_loop(
        lambda val: val[-1] == -1, search_step, init)

    u = u.at[current_row].add(min_value)
    mask = sr & (jnp.arange(n) != current_row)
    u = jnp.where(mask, u + min_value - spc[col4row], u)
    v = jnp.where(sc, v + spc - min_value, v)

    def augment(carry):
        sink, row4col, col4row, _ = carry
        i = path[sink]
        row4col = row4col.at[sink].set(i)
        col4row, sink = col4row.at[i].set(sink), col4row[i]
        return sink, row4col, col4row, i == current_row

    _, row4col, col4row, _ = lax.while_loop(lambda val: ~val[-1], augment,
                                            (sink, row4col, col4row, False))
    return u, v, path, row4col, col4row


def hungarian_algorithm(cost_matrix):
    """Minimum-cost assignment of ``min(n, m)`` rows to columns (the O(n^2 m) Hungarian
    method as in the Scenic library; a simpler program than
    :func:`base_hungarian_algorithm`, and usually faster).

    Returns:
        ``(row_indices, col_indices)``.

    Example:
        >>> import xform.numpy as jnp, xform.optim as optax
        >>> optax.assignment.hungarian_algorithm(jnp.array([[4., 1.], [2., 5.]]))
        (Array([1, 0], dtype=int32), Array([0, 1], dtype=int32))
    """
    cost_matrix = jnp.asarray(cost_matrix)
    if _empty(cost_matrix):
        return jnp.zeros(0, int), jnp.zeros(0, int)
    transpose = cost_matrix.shape[0] > cost_matrix.shape[1]
    if transpose:
        cost_matrix = cost_matrix.T
    rows, cols = cost_matrix.shape

    def row_fn(state, row):
        u, v, parent = state
        parent = parent.at[0].set(row + 1)

        def dfs_body(state):
            u, v, used, minv, path, col = state
            used = used.at[col].set(True)
            unused = ~used[1:]
            r = parent[col]
            cur = jnp.where(unused, cost_matrix[r - 1, :] - u[r] - v[1:], jnp.inf)
            path = jnp.where(cur < minv, col, path)
            minv = jnp.where(cur < minv, cur, minv)
            col = jnp.argmin(jnp.where(unused, minv, jnp.inf)) + 1
            delta = minv.min(where=unused, initial=jnp.inf)
            u = u.at[jnp.where(used, parent, rows + 1)].add(delta)   # rows + 1: a dummy slot
            v = jnp.where(used, v - delta, v)
            minv = jnp.where(unused, minv - delta, minv)
            return u, v, used, minv, path, col

        state = (u, v, jnp.zeros(cols + 1, bool), jnp.full(cols, jnp.inf),
                 jnp.zeros(cols, int), 0)
        u, v, _, _, path, col = lax.while_loop(lambda s: parent[s[-1]] != 0, dfs_body, state)

        def back_body(state):
            parent, old_col = state
            new_col = path[old_col - 1]
            return parent.at[old_col].set(parent[new_col]), new_col

        parent, _ = lax.while_loop(lambda s: s[1] != 0, back_body, (parent, col))
        return (u, v, parent), None

    init = (jnp.zeros(rows + 2), jnp.zeros(cols + 1), jnp.zeros(cols + 1, int))
    (_, _, parent), _ = lax.scan(row_fn, init, jnp.arange(rows))
    if rows == cols:
        parent, indices = parent[1:], jnp.arange(rows)
    else:
        parent, indices = lax.top_k(parent[1:], rows)
    parent = parent - 1
    return (indices, parent) if transpose else (parent, indices)
