"""The faceweave service: a REST API and web page that run swap jobs from a queue.

Layout (each module does one thing; ``app`` only wires them together):

- :mod:`~faceweave.service.config`: every setting of a running service, in one place.
- :mod:`~faceweave.service.db`: SQLite in WAL mode, the schema and its migrations.
- :mod:`~faceweave.service.audit`: the append-only operation log.
- :mod:`~faceweave.service.auth`: API keys (only a peppered hash is stored) and
  per-key token-bucket rate limits.
- :mod:`~faceweave.service.jobs`: the durable job queue; every state change is a
  transaction and claiming a job is one atomic ``UPDATE``.
- :mod:`~faceweave.service.checks`: input checks at the door: streamed uploads
  with a size limit, types sniffed from magic bytes, pixel and duration limits.
- :mod:`~faceweave.service.worker`: the worker threads that run jobs, each with
  its own models, and the retention sweep.
- :mod:`~faceweave.service.app`: the FastAPI application (lifespan, routes,
  JSON errors, the static web page).

Example:
    $ faceweave keys create --name alice --data ./faceweave-data
    $ faceweave serve --data ./faceweave-data --port 8000
"""

from faceweave.service.app import create_app
from faceweave.service.config import ServiceConfig

__all__ = ["ServiceConfig", "create_app"]
