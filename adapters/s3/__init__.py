"""The ``s3`` sink: released records archived as gzip objects in an S3 bucket (AWS S3, MinIO, any S3 API).

Records are encoded as the file sink writes them (the input's text format, byte for byte when unchanged),
staged in the state database at every flush (durable, hence acknowledged), cut into objects by size or age,
and uploaded through the sink's durable outbox (one object = one outbox batch, at least once, multipart for
large objects). boto3 is the client: install the ``[s3]`` extra (``pip install 'querylog-sidecar[s3]'``).
"""
