"""The formats prompt files come in, each read by its own tool's documented rules (sans-IO): Claude Code's
command files and skills (``claude_code.py``), VS Code's prompt files (``vscode.py``), and what they
share (``common.py``: front matter read leniently, names made valid, a first-line description). The
gateway's own format (Markdown with a Jinja template) is ``prompts.py``'s, which tells a file's kind and
reads it; ``source.py`` serves a directory of them as an upstream.
"""
