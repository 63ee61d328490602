"""The gRPC source (service ``querylog.v1.QueryLogFilter``), its codec, a client, and ``serve``/``send``."""
