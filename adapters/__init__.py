"""Built-in sources and sinks; registered under ``querylog.sources`` / ``querylog.sinks``."""
