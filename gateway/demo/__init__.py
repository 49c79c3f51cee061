"""Small prompt servers shipped with the gateway so that ``config.example.toml`` runs with no external
service. Run one with ``python -m gateway.demo.writing`` (or ``.engineering``); they speak MCP on stdio."""
