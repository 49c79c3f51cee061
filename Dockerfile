# syntax=docker/dockerfile:1
# Build stage: a wheel of the gateway and of everything it needs.
FROM python:3.12-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY gateway ./gateway
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

# Runtime stage: the wheels installed, nothing else; runs as an unprivileged user.
FROM python:3.12-slim
RUN useradd --create-home --uid 10001 --shell /usr/sbin/nologin gateway
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
COPY docker/config.toml /etc/prompt-gateway/config.toml
USER 10001
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=3s --start-period=10s --retries=3 \
    CMD ["python3", "-c", "import urllib.request, sys; sys.exit(urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=2).status != 200)"]
ENTRYPOINT ["prompt-gateway"]
CMD ["serve", "--config", "/etc/prompt-gateway/config.toml"]
