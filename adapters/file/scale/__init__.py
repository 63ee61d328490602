"""Scale-out of archive replay: partitions by a keyed hash of the user, one chain and one state per partition.

``replay --workers N`` / ``--scheduler`` (:mod:`adapters.file.scale.replay`) runs on Dask, an optional extra;
:mod:`adapters.file.scale.partition` (the routing function shared with the serving replicas) needs no Dask.
See docs/SCALE.md.
"""
