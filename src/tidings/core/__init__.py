"""The pure core: ids, activities, feed groups, aggregation, cursors, fan-out
planning, reader tiers and result types. Nothing here does I/O or imports
from the other layers (tests/core/test_layers.py checks it)."""
