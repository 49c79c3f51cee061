"""Demo prompt server: writing helpers."""

from gateway.demo.server import DemoPrompt, DemoServer, argument

LANGUAGES = ("Danish", "Dutch", "English", "French", "German", "Italian", "Japanese", "Portuguese", "Spanish")

server = DemoServer("demo-writing", [
    DemoPrompt(
        "summarize", "Summarize text", "Summarize a text at the length you choose.",
        lambda a: f"Summarize the following text in a {a.get('length', 'short')} form:\n\n{a['text']}",
        [argument("text", "The text to summarize", required=True),
         argument("length", "short, medium or long")],
        {"length": ("short", "medium", "long")},
    ),
    DemoPrompt(
        "translate", "Translate text", "Translate a text into another language.",
        lambda a: f"Translate the following text into {a['language']}:\n\n{a['text']}",
        [argument("text", "The text to translate", required=True),
         argument("language", "The target language", required=True)],
        {"language": LANGUAGES},
    ),
    DemoPrompt(
        "proofread", "Proofread", "Find spelling and grammar mistakes and propose fixes.",
        lambda a: f"Proofread this text and list each mistake with a fix:\n\n{a['text']}",
        [argument("text", "The text to proofread", required=True)],
    ),
])  # fmt: skip

if __name__ == "__main__":
    server.run()
