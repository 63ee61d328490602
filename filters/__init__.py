"""Built-in filters; each module registers under the entry-point group ``querylog.filters``."""
