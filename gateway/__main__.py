"""Command line: ``prompt-gateway serve|check|list --config FILE``. Thin: it parses, wires, prints."""

from __future__ import annotations

from gateway import start_up  # first: the garbage collector waits until the imports below are done

# isort: split
import argparse
import functools
import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import structlog

from gateway import __version__
from gateway.app import run_gateway
from gateway.config import Config, ServerSettings, load_config
from gateway.explaining import explain_command, token_rules
from gateway.failed_start import answer_until_hangup, meant_for_stdio, one_line
from gateway.importer.clients import CLIENT_FORMATS, client_of
from gateway.importer.writer import import_client_config
from gateway.observability.logs import configure_logging
from gateway.observability.starting import telemetry_wanted
from gateway.protocol.control_chars import escaped, json_text
from gateway.protocol.errors import ConfigError, GatewayError, UnknownPrompt
from gateway.reports import check_command, list_command, say
from gateway.serve_command import serve_command
from gateway.serving import ensure_safe_exposure, listening_socket
from gateway.transports.child_env import withhold_inherited_descriptors

start_up.resume()  # here, not in main(): a test importing a name from this module gets its collector back too

EXIT_OK, EXIT_UPSTREAM_FAILED, EXIT_CONFIG = 0, 1, 2
log = structlog.get_logger("gateway.cli")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="prompt-gateway",
        description="Serve the prompts of many MCP servers through one endpoint, with namespacing, one "
        "cursor over all of them, and allow/deny policy.",
        epilog="Run 'prompt-gateway COMMAND --help' for a command's options. Configuration: see README.md.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    importer = commands.add_parser(
        "import",
        help="turn a client's MCP server list into a gateway config",
        description="Print a gateway TOML config made from the MCP servers of a Claude Desktop, Claude Code, "
        "Cursor, Windsurf, VS Code or Zed config file, read as that client reads it.",
    )
    importer.add_argument(
        "--from",
        dest="source",
        choices=CLIENT_FORMATS,
        default="auto",
        help="the client whose config FILE is (auto: told by its shape)",
    )
    importer.add_argument(
        "--workspace",
        help="the folder ${workspaceFolder} means (default: the parent of the .vscode/.cursor folder FILE is in)",
    )
    importer.add_argument("file", help="the client's JSON config")
    importer.add_argument("--output", "-o", help="write here instead of stdout (refuses to overwrite)")
    importer.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"])
    for name, text in (
        ("serve", "serve the unified prompt list to MCP clients"),
        ("check", "validate the config, start every upstream, print their state, exit non-zero on failure"),
        ("list", "print the unified, policy-filtered prompt list, and the skills served"),
        ("health", "ask the running HTTP gateway of this config for /healthz: exit 0 if healthy (a probe)"),
        ("render", "print a prompt's messages as a client would receive them"),
        ("explain", "say why a caller (a token, or an access token's claims) sees a prompt or a skill or not"),
    ):
        sub = commands.add_parser(name, help=text, description=text)
        sub.add_argument("--config", "-c", required=True, help="path to the TOML config")
        sub.add_argument(
            "--log-level",
            default="warning" if name != "serve" else "info",
            choices=["debug", "info", "warning", "error"],
        )
        if name == "render":
            sub.add_argument("name", help="the prompt's name as clients see it (namespace__name)")
            sub.add_argument("--arg", action="append", default=[], metavar="K=V", help="an argument (repeatable)")
            sub.add_argument("--json", action="store_true", help="print the result as JSON")
        if name == "list":
            sub.add_argument("--json", action="store_true", help="print the prompts (--skills: the skills) as JSON")
            sub.add_argument(
                "--tag", action="append", help="only prompts and skills with this tag (repeatable: all of them)"
            )
            sub.add_argument("--skills", action="store_true", help="only the skills (docs/skills.md)")
            sub.add_argument(
                "--token", metavar="TOKEN_NAME", help="what a client with this [[server.tokens]] entry sees"
            )
        if name == "serve":
            sub.add_argument("--watch", action="store_true", help="reload the config when the file changes")
        if name == "explain":
            sub.add_argument(
                "name", nargs="?", help="the prompt's name as clients see it, or a skill's (omit with --all)"
            )
            sub.add_argument("--all", action="store_true", help="every prompt and skill there is, one line each")
            caller = sub.add_mutually_exclusive_group()
            caller.add_argument("--token", metavar="TOKEN_NAME", help="as the [[server.tokens]] entry of this name")
            caller.add_argument(
                "--claims", metavar="FILE.json", help="as a person whose access token holds these claims"
            )
            sub.add_argument("--json", action="store_true", help="print the decisions as JSON")
    return parser


async def _render(gateway_config: Config, name: str, pairs: Sequence[str], as_json: bool) -> int:
    arguments = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            say(f"prompt-gateway: --arg {pair!r} is not K=V", file=sys.stderr)
            return EXIT_CONFIG
        arguments[key] = value
    async with run_gateway(gateway_config, settle=True) as gateway:
        try:
            result = await gateway.catalog.get_prompt({"name": name, "arguments": arguments})
        except GatewayError as exc:
            skills = (await gateway.catalog.skills.explanations([], name))[0] if isinstance(exc, UnknownPrompt) else []
            said = (
                f": it is the skill {skills[0].skill_uri}, served as a skill only (skills/get reads it)"
                if skills
                else ""
            )
            say(f"prompt-gateway: {exc.message}{said}", file=sys.stderr)
            return EXIT_UPSTREAM_FAILED
    if as_json:
        print(json_text(result, indent=2))
        return EXIT_OK
    for message in result.get("messages", []):
        content = message.get("content") or {}
        text = content.get("text") if content.get("type") == "text" else f"[{content.get('type', '?')} content]"
        say(f"── {escaped(str(message.get('role', '?')))} ──\n{text}\n")
    return EXIT_OK


def _import(args: argparse.Namespace) -> int:
    try:
        location = str(Path(args.file).resolve())
        named, project = client_of(location)
        workspace = str(Path(args.workspace).resolve()) if args.workspace else None  # as clients record it
        with open(args.file, encoding="utf-8") as source:
            imported = import_client_config(
                source.read(),
                client=args.source if args.source != "auto" else named,
                workspace=workspace or project,
                project=workspace or project,
            )
        if args.output:
            with open(args.output, "x", encoding="utf-8") as target:
                target.write(imported.toml)
        else:
            sys.stdout.write(imported.toml)
        for warning in imported.warnings:  # after the output: none for a file refused
            say(f"prompt-gateway: warning: {escaped(warning)}", file=sys.stderr)
    except ConfigError as exc:
        say(f"prompt-gateway: {exc.message}", file=sys.stderr)
        return EXIT_CONFIG
    except FileExistsError:
        say(f"prompt-gateway: {args.output} exists already; choose another file or remove it", file=sys.stderr)
        return EXIT_CONFIG
    except OSError as exc:
        say(f"prompt-gateway: cannot use {exc.filename}: {exc.strerror}", file=sys.stderr)
        return EXIT_CONFIG
    return EXIT_OK


def _health(server: ServerSettings) -> int:
    """The Docker health check: the address comes from the config, so it follows the configured port."""
    import urllib.request  # only here: every other command starts without it

    if server.transport != "http":
        say("prompt-gateway: this config serves stdio; there is no HTTP health endpoint", file=sys.stderr)
        return EXIT_CONFIG
    if server.port == 0:
        say("prompt-gateway: port = 0 picks a port at start-up; health needs a fixed port", file=sys.stderr)
        return EXIT_CONFIG
    host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(server.host, server.host)  # noqa: S104
    url = f"http://{f'[{host}]' if ':' in host else host}:{server.port}/healthz"
    try:
        with urllib.request.urlopen(url, timeout=3) as response:
            status = response.status
    except (OSError, ValueError) as exc:
        say(f"prompt-gateway: {url}: {getattr(exc, 'reason', exc)}", file=sys.stderr)
        return EXIT_UPSTREAM_FAILED
    say(f"{url}: {status}")
    return EXIT_OK if status == 200 else EXIT_UPSTREAM_FAILED


def _event_loop_options() -> dict[str, Any]:
    """uvloop where it is installed (a dependency except on Windows): its event loop and transports are
    C, which a proxy doing two HTTP exchanges per request feels (docs/performance.md)."""
    return {"use_uvloop": importlib.util.find_spec("uvloop") is not None}


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    configure_logging(args.log_level)
    if args.command == "import":
        return _import(args)
    try:
        # list, render, explain and health check no token: an unset secret does not stop them
        config = load_config(args.config, secrets_read=args.command in ("serve", "check"))
        if args.command in ("serve", "check"):
            telemetry_wanted(config.telemetry)
        if args.command == "serve":
            ensure_safe_exposure(config)
    except ConfigError as exc:
        return _cannot_start(args, exc.message)
    if args.command == "serve":
        withhold_inherited_descriptors()  # uvloop's children would inherit them (libuv has no close_fds)
        sock = None
        if config.server.transport == "http":  # bound before any upstream starts: a taken port fails at once
            try:
                sock = listening_socket(config.server.host, config.server.port)
            except OSError as exc:
                where = f"{config.server.host}:{config.server.port}"
                say(f"prompt-gateway: cannot listen on {where}: {exc.strerror or exc}", file=sys.stderr)
                return EXIT_CONFIG
        return anyio.run(serve_command, config, args.config, args.watch, sock, backend_options=_event_loop_options())
    if args.command == "check":
        return anyio.run(check_command, config)
    if args.command == "health":
        return _health(config.server)
    if args.command == "render":
        return anyio.run(_render, config, args.name, tuple(args.arg), args.json)
    if args.command == "explain":
        return _explain(config, args)
    try:
        viewer = token_rules(config, args.token) if args.token is not None else None
    except ConfigError as exc:
        say(f"prompt-gateway: {exc.message}", file=sys.stderr)
        return EXIT_CONFIG
    run_list = functools.partial(list_command, skills_only=args.skills, viewer=viewer)
    return anyio.run(run_list, config, args.json, tuple(args.tag or ()))


def _cannot_start(args: argparse.Namespace, reason: str) -> int:
    """The config cannot be used. ``serve`` says why on one line, and to the MCP client that launched it
    over stdio as the error of each of its requests (``failed_start.py``): not just "Connection closed"."""
    if args.command != "serve":
        say(f"prompt-gateway: {reason}", file=sys.stderr)
        return EXIT_CONFIG
    line = one_line(reason)
    say(f"prompt-gateway: {line}", file=sys.stderr)
    if meant_for_stdio(args.config):
        anyio.run(answer_until_hangup, line)
    return EXIT_CONFIG


def _explain(config: Config, args: argparse.Namespace) -> int:
    if (args.name is None) == (not args.all):
        say("prompt-gateway: explain takes a prompt's or skill's NAME or --all, not both", file=sys.stderr)
        return EXIT_CONFIG
    try:
        run = functools.partial(explain_command, token=args.token, claims_file=args.claims, as_json=args.json)
        return anyio.run(run, config, None if args.all else args.name)
    except ConfigError as exc:
        say(f"prompt-gateway: {exc.message}", file=sys.stderr)
        return EXIT_CONFIG


if __name__ == "__main__":
    sys.exit(main())
