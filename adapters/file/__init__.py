"""Files: the ``file`` source (TSV or JSON lines, gzip, stdin, a named pipe; ``resume``, a first pass), the
``file`` and ``stdout`` sinks (``mode: resume``), the ``replay``/``filter`` commands over the runtime's driver
(:mod:`sidecar.drive`) and the partitioned replay on Dask (:mod:`adapters.file.scale`)."""
