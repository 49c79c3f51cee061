# syntax=docker/dockerfile:1
# Build stage: a wheel of the gateway and of everything it needs.
FROM python:3.12-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY gateway ./gateway
RUN pip wheel --no-cache-dir --wheel-dir /wheels '.[telemetry]'

# Runtime stage: the wheels installed, nothing else; runs as an unprivileged user.
FROM python:3.12-slim
RUN useradd --create-home --uid 10001 --shell /usr/sbin/nologin gateway
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
COPY docker/config.toml /etc/prompt-gateway/config.toml
USER 10001
EXPOSE 8080
# The probe reads the address from the config, so a config that moves the port moves the check too
# (mount your config at this path; a command naming another path sets PROMPT_GATEWAY_CONFIG to it too).
ENV PROMPT_GATEWAY_CONFIG=/etc/prompt-gateway/config.toml
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
    CMD ["sh", "-c", "exec prompt-gateway health --config \"$PROMPT_GATEWAY_CONFIG\""]
ENTRYPOINT ["prompt-gateway"]
CMD ["serve", "--config", "/etc/prompt-gateway/config.toml"]
