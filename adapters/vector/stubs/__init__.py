"""Generated gRPC/protobuf stubs (proto/generate.py); do not edit."""
