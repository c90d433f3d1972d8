"""Which cells the report's figures draw when a set has more than a figure can hold.

Why a module of its own: a figure with one bar, row or panel per cell grows with the set (a
500-cell set asked matplotlib for a 900x109860-pixel image and report.py exited 1, issue 43
item 4), and drawing thousands of legends takes hours. So every figure draws at most
MAX_FIGURE_CELLS cells: the first ones in display order (the order of the Cells table, so
the key letters agree), with the baseline always among them. The tables still list every
cell, and each figure says how many cells it left out.
"""

import copy

from mpbench.report.labels import display_order

# About what one figure can show legibly: 40 bars at 0.55 in each is a 25-inch chart, 40
# rows of the eval-loss figure are 90 inches tall, still well below matplotlib's 2^16-pixel limit.
MAX_FIGURE_CELLS = 40


def figure_view(rs, limit=None):
    """(the ResultSet the figures draw, the sentence saying what they leave out or None).

    The view is a shallow copy of `rs` holding the first `limit` cells in display order, the
    baseline among them (it takes the last place when it sorts later); its cells keep their
    run order, as the loader gave them."""
    limit = MAX_FIGURE_CELLS if limit is None else limit     # read at call time: tests lower it
    if len(rs.cells) <= limit:
        return rs, None
    ordered = display_order(rs)
    kept = ordered[:limit]
    base = rs.baseline()
    if base is not None and base not in kept:
        kept = kept[:limit - 1] + [base]
    kept_ids = {c.cell_id for c in kept}
    view = copy.copy(rs)
    view.cells = [c for c in rs.cells if c.cell_id in kept_ids]
    left = len(rs.cells) - len(view.cells)
    note = (f"This figure draws at most {limit} of the set's {len(rs.cells)} cells: the first in the Cells "
            f"table's order{', the baseline among them' if base is not None else ''}. The other {left} are "
            "left out of every figure; the tables list all of them.")
    return view, note
