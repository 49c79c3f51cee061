"""Byte and message streams. Nothing here knows about prompts, or even JSON-RPC: frames are bytes."""

from gateway.transports.base import MessageStream, MessageTooLarge

__all__ = ["MessageStream", "MessageTooLarge"]
