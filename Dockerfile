# faceweave service: REST API + web page on port 8000.
#
#   docker build -t faceweave .
#   docker run --rm -p 8000:8000 -v faceweave-data:/data faceweave
#   docker run --rm -v faceweave-data:/data faceweave faceweave keys create --name alice
#
# requirements.txt must list the service's packages (fastapi, uvicorn, python-multipart);
# see docs/service.md.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# OpenCV (pulled in by mediapipe) needs libGL and GLib at import time.
RUN apt-get update \
    && apt-get install -y --no-install-recommends libgl1 libglib2.0-0 \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /app

# Dependencies first: this layer is rebuilt only when requirements.txt changes.
COPY requirements.txt ./
RUN pip install -r requirements.txt

COPY pyproject.toml README.md ./
COPY faceweave ./faceweave
# Editable, no dependencies (installed above): the package runs from /app, so the web
# page's static files and the face model data are found without package-data rules.
RUN pip install --no-deps -e . \
    && python -c "import faceweave.service"

# An unprivileged user owns only the data folder.
RUN useradd --system --create-home --uid 10001 faceweave \
    && mkdir -p /data \
    && chown faceweave:faceweave /data
USER faceweave
VOLUME ["/data"]

EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4)"

CMD ["faceweave", "serve", "--host", "0.0.0.0", "--port", "8000", "--data", "/data"]
