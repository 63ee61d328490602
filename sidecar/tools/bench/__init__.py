"""``querylog bench``: benchmark commands that print figures (never timed tests).

Each module exposes ``COMMAND``, a click command that :mod:`.command` adds under ``bench``.
"""
