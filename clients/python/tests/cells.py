"""Cells the sync and async tests share."""

# The cell makes a tool call (barrier) after each write and waits for its
# answer; the handler answers only once that write's event has reached the
# callbacks. So the order is fixed by the cell, not by timing, and each
# event is shown to arrive while the cell still runs. lookup returns a
# value the cell prints.
ORDERED_CELL = """
import sys, kernpool_tools as t
class H:
    def _repr_html_(self):
        return "<b>three</b>"
print("one")
t.barrier(n=1)
sys.stderr.write("two\\n"); sys.stderr.flush()
t.barrier(n=2)
display(H())
t.barrier(n=3)
print("four", t.lookup(key="k"))
"""

ORDERED_TOOLS = ["barrier", "lookup"]
