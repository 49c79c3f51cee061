"""Demo prompt server: software-engineering helpers (and one internal prompt the example policy hides)."""

from gateway.demo.server import DemoPrompt, DemoServer, argument

LANGUAGES = ("c", "go", "java", "javascript", "python", "rust", "typescript")

server = DemoServer("demo-engineering", [
    DemoPrompt(
        "code_review", "Review code", "Review a piece of code for bugs, clarity and style.",
        lambda a: f"Review this {a.get('language', '')} code. List bugs first, then clarity, then style:\n\n"
                  f"{a['code']}",
        [argument("code", "The code to review", required=True),
         argument("language", "The programming language")],
        {"language": LANGUAGES},
    ),
    DemoPrompt(
        "commit_message", "Write a commit message", "Write a concise, honest commit message for a diff.",
        lambda a: f"Write a commit message (summary line under 72 characters, then why) for:\n\n{a['diff']}",
        [argument("diff", "The output of git diff", required=True)],
    ),
    DemoPrompt(
        "explain_error", "Explain an error", "Explain an error message and suggest how to fix it.",
        lambda a: f"Explain this error and how to fix it:\n\n{a['error']}",
        [argument("error", "The error message or traceback", required=True)],
    ),
    DemoPrompt(
        "internal_debug_dump", "Internal: debug dump", "Maintainers only; hidden by the example policy.",
        lambda a: "Dump the internal state.",
    ),
])  # fmt: skip

if __name__ == "__main__":
    server.run()
