"""stdio both ways: a child process we talk to (upstream), and our own stdin/stdout (front end).

Child processes get their own session so that a terminal's Ctrl-C reaches only the gateway, which then
shuts them down in order, within a bound (child_stop.py): close stdin, wait, SIGTERM the group and
whatever escaped it carrying the child's tag (orphans.py), wait, SIGKILL them. No orphans.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass

import anyio
import anyio.from_thread
import anyio.lowlevel
from anyio.abc import ByteReceiveStream, ByteSendStream, Process

from gateway.transports import orphans
from gateway.transports.base import DEFAULT_MAX_MESSAGE_BYTES, NewlineFramedStream
from gateway.transports.child_env import child_environment
from gateway.transports.child_stop import STOP_TIMES, StopTimes, end_group, stop_child

__all__ = ["ChildSpec", "child_environment", "open_child", "open_own_stdio"]


@dataclass(frozen=True, slots=True)
class ChildSpec:
    command: str
    args: Sequence[str] = ()
    env: Mapping[str, str] | None = None
    cwd: str | None = None
    stop: StopTimes = STOP_TIMES


@asynccontextmanager
async def open_child(
    spec: ChildSpec,
    *,
    on_stderr_line: Callable[[str], None],
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    on_output_held: Callable[[], None] | None = None,
) -> AsyncIterator[tuple[NewlineFramedStream, Process]]:
    """Start the child and yield its framed stdin/stdout; stderr lines go to ``on_stderr_line``;
    ``on_output_held``: the child exited, and its stdout has not ended (``_end_group_with_leader``)."""
    tag = orphans.new_tag()
    orphans.spawning += 1
    orphans.started_any = True
    try:
        process = await anyio.open_process(
            [spec.command, *spec.args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**child_environment(spec.env or {}), orphans.TAG_VARIABLE: tag},
            cwd=spec.cwd,
            start_new_session=True,
        )
    except OSError as exc:
        if exc.filename is None:  # (a folder that is a file: NotADirectoryError)
            # uvloop (serve) names neither; Python's subprocess (check) names the one at fault
            folder_gone = spec.cwd is not None and not await anyio.Path(spec.cwd).is_dir()
            exc.filename = spec.cwd if folder_gone else spec.command
        raise
    else:
        orphans.managed.add(process.pid)
        orphans.groups.add(process.pid)
        orphans.tags.add(tag)
    finally:
        orphans.spawning -= 1
    if process.stdin is None or process.stdout is None or process.stderr is None:  # pragma: no cover
        raise RuntimeError("the child's pipes were not created")
    output = _Output(process.stdout)
    stream = NewlineFramedStream(output, process.stdin, max_message_bytes=max_message_bytes)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_pump_stderr, process.stderr, on_stderr_line)
            tg.start_soon(_end_group_with_leader, process, output, spec.stop, on_output_held)
            try:
                yield stream, process
            finally:
                with anyio.CancelScope(shield=True):
                    await stop_child(process, tag, spec.stop)
                tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True), suppress(Exception):
            await process.aclose()
        orphans.managed.discard(process.pid)
        orphans.groups.discard(process.pid)
        orphans.tags.discard(tag)


async def _pump_stderr(stderr: ByteReceiveStream, on_line: Callable[[str], None]) -> None:
    pending = b""
    with suppress(anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
        while True:
            pending += await stderr.receive()
            *lines, pending = pending.split(b"\n")
            for line in lines:
                on_line(line.decode(errors="replace").rstrip())
            if len(pending) > 65536:  # a child that never prints a newline must not grow memory
                on_line(pending.decode(errors="replace"))
                pending = b""


async def _end_group_with_leader(
    process: Process, output: _Output, times: StopTimes, on_output_held: Callable[[], None] | None
) -> None:
    """Once the server itself has exited, what it started goes too: its children would otherwise run on,
    and hold its stdout open, so that the end of the stream (how its exit is noticed) would never come.
    What left the group may hold it still: a daemon that inherited a copy (uvx, npm and shells keep
    copies of their stdio at higher descriptors; a tester's server so stayed "ready" for good), or the
    server itself, daemonized (forked, ``setsid``, its first process gone) and serving on. Which it is
    only the server can tell: ``on_output_held`` is told, and the connection's owner asks it."""
    await process.wait()
    await end_group(process, times)  # what left the group is looked for once, as the child is closed
    with anyio.move_on_after(times.eof_s):  # what it wrote before it exited is read by then
        await output.ended.wait()
    if not output.ended.is_set() and on_output_held is not None:
        on_output_held()


class _Output(ByteReceiveStream):
    """The child's stdout, telling when it has ended (``ended``)."""

    def __init__(self, stream: ByteReceiveStream) -> None:
        self._stream = stream
        self.ended = anyio.Event()

    async def receive(self, max_bytes: int = 65536) -> bytes:
        try:
            return await self._stream.receive(max_bytes)
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self.ended.set()
            raise

    async def aclose(self) -> None:
        await self._stream.aclose()


class _FdReceiveStream(ByteReceiveStream):
    """Reads a file descriptor on a daemon thread: works for pipes, ttys and regular files alike, and a
    read that never returns (an idle stdin) cannot hold up the process's exit. The queue is bounded,
    so a client that floods stdin is throttled by the pipe, not buffered in memory."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._chunks_in, self._chunks = anyio.create_memory_object_stream[bytes](4)
        self._thread: threading.Thread | None = None

    async def receive(self, max_bytes: int = 65536) -> bytes:
        if self._thread is None:
            token = anyio.lowlevel.current_token()
            self._thread = threading.Thread(target=self._pump, args=(token,), name="stdin-reader", daemon=True)
            self._thread.start()
        try:
            return await self._chunks.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise anyio.EndOfStream from None

    def _pump(self, token: anyio.lowlevel.EventLoopToken) -> None:
        try:
            while chunk := os.read(self._fd, 65536):
                anyio.from_thread.run(self._chunks_in.send, chunk, token=token)
        except Exception:  # noqa: S110 - the loop has closed or the fd broke: either way, end of stream
            pass
        finally:
            with suppress(Exception):
                anyio.from_thread.run_sync(self._chunks_in.close, token=token)

    async def aclose(self) -> None:
        self._chunks_in.close()
        self._chunks.close()


class _FdSendStream(ByteSendStream):
    def __init__(self, fd: int) -> None:
        self._fd = fd

    async def send(self, item: bytes) -> None:
        await anyio.to_thread.run_sync(_write_all, self._fd, item)

    async def aclose(self) -> None:
        return None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


class _PolledReceiveStream(ByteReceiveStream):
    """Reads a pipe or socket when the event loop says it is readable: no thread hop per message."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    async def receive(self, max_bytes: int = 65536) -> bytes:
        await anyio.wait_readable(self._fd)
        try:
            chunk = os.read(self._fd, max_bytes)  # readable: returns what is there without blocking
        except BlockingIOError:
            return await self.receive(max_bytes)
        except OSError:
            raise anyio.EndOfStream from None
        if not chunk:
            raise anyio.EndOfStream
        return chunk

    async def aclose(self) -> None:
        return None


class _PolledSendStream(ByteSendStream):
    """Writes a pipe or socket in non-blocking mode, waiting on the event loop when it is full."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._was_blocking = os.get_blocking(fd)
        os.set_blocking(fd, False)  # the write end of our stdout pipe is ours alone

    async def send(self, item: bytes) -> None:
        view = memoryview(item)
        while view:
            try:
                view = view[os.write(self._fd, view) :]
            except BlockingIOError:
                await anyio.wait_writable(self._fd)
            except OSError as exc:
                raise anyio.BrokenResourceError from exc

    async def aclose(self) -> None:
        with suppress(OSError):
            os.set_blocking(self._fd, self._was_blocking)


def _pollable(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def open_own_stdio(*, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> NewlineFramedStream:
    """The gateway's own stdin/stdout as a frame stream (front end in stdio mode).

    Pipes and sockets (how MCP clients launch servers) are polled by the event loop; anything else
    (a terminal, a regular file) is read and written on a thread, which works for every kind of file.
    """
    stdin, stdout = sys.stdin.fileno(), sys.stdout.fileno()
    receive: ByteReceiveStream = _PolledReceiveStream(stdin) if _pollable(stdin) else _FdReceiveStream(stdin)
    send: ByteSendStream = _PolledSendStream(stdout) if _pollable(stdout) else _FdSendStream(stdout)
    return NewlineFramedStream(receive, send, max_message_bytes=max_message_bytes)
