"""``concierge bench``: measurements against the real RabbitMQ, the real engine and model.

- ``cancel``: a cancel on its own queue against one placed in the request queue (the FIFO
  trap), while the answer decodes or while it still reads a long prompt.
- ``stream``: what the pipeline (engine, broker, reply consumer) costs over llama.cpp alone.
- ``queue``: a burst of requests served in order, memory, and ``cancelled_sessions`` bounded.
- ``conversation``: a follow-up's first token, with llama.cpp's state cache and without.
- ``queue-types``: a classic against a quorum request queue on one node (the broker alone).
- ``all``: cancel, stream, queue and conversation in one run, one document, one table.

Each run uses broker names of its own and deletes them at the end; see ``docs/benchmarks.md``.
"""
