"""A process's start-up, beside the flow: the garbage collector held off while its imports run.

Importing this module disables the cyclic garbage collector; ``resume()`` freezes what is alive then
and enables the collector again. A process entry point (``gateway/__main__.py``, the demo servers
through ``demo/server.py``, the test servers through ``tests/servers/__init__.py``) imports it before
anything else and calls ``resume()`` right after its last import.

Why: an import allocates many objects and frees few, and every 700 net allocations the collector runs,
finding almost nothing. Importing the gateway's CLI ran it about 120 times and an MCP SDK test server
about 190 times, collecting some 700 objects in all; holding it off took an SDK test server's start from
0.48 to 0.44 CPU-seconds (December 2026, this machine), and the test suite starts hundreds of such
processes. Once imported, the modules, classes and functions live as long as the process:
``gc.freeze()`` moves them (about 100,000 objects) to the permanent generation, so the full collections
to come never scan them again.

A process that is already running when it imports an entry point (a test importing a name from
``gateway.__main__``) gets its collector back at the entry point's ``resume()`` too; what it held then is
frozen with the rest.
"""

from __future__ import annotations

import gc

_WAS_ENABLED = gc.isenabled()
gc.disable()


def resume() -> None:
    """The imports are done: freeze what they made and collect again (unless the collector was off before
    this module was imported: then whoever turned it off decides)."""
    gc.freeze()
    if _WAS_ENABLED:
        gc.enable()
