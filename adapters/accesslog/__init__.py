"""nginx and Apache access logs as a text format (``schema.format: access_log``): docs/STACK.md."""
