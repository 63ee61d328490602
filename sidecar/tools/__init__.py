"""Offline tools on top of the runtime: audit, bench, generate, corpus generators, evaluators, the demo.

Nothing in the runtime imports them; each is a command registered under
``querylog.commands`` and imported only when it runs.
"""
