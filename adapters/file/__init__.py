"""Files: the ``file`` source (TSV or JSON lines, gzip, stdin), the ``file`` and ``stdout`` sinks, and
``querylog replay`` (an archive through the chain, with ``--resume`` and ``--prescan``)."""
