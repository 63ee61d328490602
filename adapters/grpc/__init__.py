"""The gRPC source (service ``querylog.v1.QueryLogFilter``): an asynchronous server (:mod:`.server`), the RPC
handlers and the delivery model (:mod:`.service`: what a caller can receive), access control (:mod:`.auth`:
bearer token; mutual TLS in :mod:`.server`), the codec, a client, and ``serve``/``send``."""
