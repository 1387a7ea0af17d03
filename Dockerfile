# One image for every ksched service; the command picks the service.
FROM python:3.11-slim

ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
COPY pyproject.toml README.md ./
COPY shared ./shared
COPY services ./services
RUN pip install . && useradd --system --uid 10001 ksched

USER ksched
CMD ["python", "-m", "services.worker"]
