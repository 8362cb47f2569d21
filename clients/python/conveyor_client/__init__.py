"""Python client for conveyor, an LLM serving runtime (ZeroMQ + msgpack, protocol 1).

    from conveyor_client import Client
    with Client() as c:
        print(c.generate("Write a haiku about queues.", max_tokens=64))

Client is synchronous (one per thread); AsyncClient has the same API for asyncio.
The protocol is specified in schemas/protocol.md of the conveyor repository.
"""
from .aio import AsyncClient
from .client import Client
from .curve import load_curve_keys
from .protocol import (DEFAULT_PUB, DEFAULT_PULL, DEFAULT_ROUTER, ERROR_CODES, PROTOCOL_VERSION,
                       ConveyorError, ConveyorTimeout, build_submit, topic_for, valid_id)
from .sequencer import JobSequencer

__all__ = ["Client", "AsyncClient", "ConveyorError", "ConveyorTimeout", "JobSequencer",
           "build_submit", "load_curve_keys", "topic_for", "valid_id", "PROTOCOL_VERSION",
           "ERROR_CODES",
           "DEFAULT_ROUTER", "DEFAULT_PUB", "DEFAULT_PULL"]
__version__ = "0.1.0"
