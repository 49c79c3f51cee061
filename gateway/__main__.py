"""Command line: ``prompt-gateway serve|check|list --config FILE``. Thin: it parses, wires, prints."""

from __future__ import annotations

import argparse
import json
import signal
import sys
from collections.abc import Sequence
from typing import Any

import anyio

from gateway import __version__
from gateway.app import ensure_safe_exposure, run_gateway, serve_http, serve_stream
from gateway.config import Config, load_config
from gateway.errors import ConfigError, UpstreamError
from gateway.observability import configure_logging
from gateway.transports.stdio import open_own_stdio

EXIT_OK, EXIT_UPSTREAM_FAILED, EXIT_CONFIG = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="prompt-gateway", description=__doc__)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    for name, text in (
        ("serve", "serve the unified prompt list to MCP clients"),
        ("check", "validate the config, start every upstream, print their state, exit non-zero on failure"),
        ("list", "print the unified, policy-filtered prompt list"),
    ):
        sub = commands.add_parser(name, help=text, description=text)
        sub.add_argument("--config", "-c", required=True, help="path to the TOML config")
        sub.add_argument(
            "--log-level",
            default="warning" if name != "serve" else "info",
            choices=["debug", "info", "warning", "error"],
        )
        if name == "list":
            sub.add_argument("--json", action="store_true", help="print the prompts as JSON")
    return parser


async def _until_signal(scope: anyio.CancelScope) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for _ in signals:
            scope.cancel()
            return


async def _serve(config: Config) -> int:
    async with anyio.create_task_group() as tg:
        tg.start_soon(_until_signal, tg.cancel_scope)
        async with run_gateway(config) as gateway:
            if config.server.transport == "http":
                await serve_http(gateway)
            else:
                await serve_stream(gateway, open_own_stdio(max_message_bytes=config.gateway.max_message_bytes))
        tg.cancel_scope.cancel()
    return EXIT_OK


def _table(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows)


async def _check(config: Config) -> int:
    async with run_gateway(config) as gateway:
        counts = await gateway.catalog.prompt_counts()
        visible = await gateway.catalog.all_prompts()
        collisions = await gateway.catalog.collisions()
        rows = [["UPSTREAM", "TRANSPORT", "STATE", "PROMPTS", "DETAIL"]]
        failed = False
        for connector in gateway.connectors:
            count = counts[connector.namespace]
            detail = connector.last_error or ""
            if isinstance(count, UpstreamError):
                detail, count_text, failed = detail or count.message, "-", True
            else:
                count_text = str(count)
                if connector.ready:
                    version = connector.protocol_version or "?"
                    detail = f"{connector.server_info.get('name', '?')} (MCP {version})"
            failed = failed or not connector.ready
            rows.append([connector.namespace, connector.settings.transport, connector.state, count_text, detail])
    print(_table(rows))
    print(f"\n{len(visible['prompts'])} prompts visible through the gateway after policy.")
    for collision in collisions:
        print(f"collision: {collision.name} is served from {collision.winner}; {collision.loser}'s is hidden")
    return EXIT_UPSTREAM_FAILED if failed else EXIT_OK


def _print_prompts(listing: dict[str, Any]) -> None:
    rows = [["NAME", "ARGUMENTS", "DESCRIPTION"]]
    for prompt in listing["prompts"]:
        args = ", ".join(a.get("name", "?") + ("" if a.get("required") else "?") for a in prompt.get("arguments") or ())
        description = str(prompt.get("description") or prompt.get("title") or "").splitlines()
        rows.append([prompt["name"], args, description[0][:80] if description else ""])
    print(_table(rows))


async def _list(gateway_config: Config, as_json: bool) -> int:
    async with run_gateway(gateway_config) as gateway:
        listing = await gateway.catalog.all_prompts()
        failed = [c.namespace for c in gateway.connectors if not c.ready]
    if as_json:
        print(json.dumps(listing["prompts"], indent=2, ensure_ascii=False))
    else:
        _print_prompts(listing)
    for namespace in sorted(set(failed) | set(listing["unavailable"])):
        print(f"warning: upstream {namespace} is unavailable; its prompts are missing", file=sys.stderr)
    return EXIT_UPSTREAM_FAILED if failed else EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    configure_logging(args.log_level)
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print(f"prompt-gateway: {exc.message}", file=sys.stderr)
        return EXIT_CONFIG
    if args.command == "serve":
        try:
            ensure_safe_exposure(config)
        except ConfigError as exc:
            print(f"prompt-gateway: {exc.message}", file=sys.stderr)
            return EXIT_CONFIG
        return anyio.run(_serve, config)
    if args.command == "check":
        return anyio.run(_check, config)
    return anyio.run(_list, config, args.json)


if __name__ == "__main__":
    sys.exit(main())
