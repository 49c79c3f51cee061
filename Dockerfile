# syntax=docker/dockerfile:1
FROM python:3.12-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY gateway ./gateway
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.12-slim
RUN useradd --create-home --uid 10001 gateway
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
COPY config.example.toml /etc/prompt-gateway/config.toml
USER gateway
ENTRYPOINT ["prompt-gateway"]
CMD ["serve", "--config", "/etc/prompt-gateway/config.toml"]
