"""``category_buffer``: k-anonymous streaming by category buffering (paper 001, Algorithm 2).

See :mod:`filters.category_buffer.filter` for the algorithm and the places where it
departs from (improves on) the paper, and :mod:`filters.category_buffer.config`
for every option.
"""

from filters.category_buffer.config import CategoryBufferConfig
from filters.category_buffer.filter import CategoryBufferFilter

__all__ = ["CategoryBufferConfig", "CategoryBufferFilter"]
