"""The ``concierge`` command and the operator's tools (status, kb, benchmarks).

Tools sit outside the layers: they may import ``bots``, ``engine``, ``broker`` and ``config``;
none of those imports ``cli``.
"""
