"""Reading a response body a piece at a time, never more than its reader allows.

Pages, feeds and robots.txt are gathered by ``Collect`` up to a size; a sitemap goes through
a pull parser as it arrives (``sitemap.py``). Gzip (sitemap.xml.gz, often served as plain
bytes) is unpacked in bounded pieces, so a small bomb cannot unpack into gigabytes.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import Protocol

import aiohttp

from engine.knowledge.scrape.errors import FetchError, NotHtml

CHUNK_BYTES = 64 * 1024
MIB = 1024 * 1024
GZIP_MAGIC = b"\x1f\x8b"
GZIP_WBITS = 16 + zlib.MAX_WBITS  # zlib reads the gzip header and trailer itself
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})


class BodyReader(Protocol):
    """Takes a body as it arrives: ``start`` sees the Content-Type before any byte is read;
    ``feed`` returns False when it has read enough, and raises ``FetchError`` to refuse."""

    def start(self, content_type: str) -> None: ...

    def feed(self, data: bytes) -> bool: ...


class Collect:
    """The body in memory, up to ``max_bytes``: more fails the request (``too large``), or,
    with ``cut_off``, ends the reading there (robots.txt: RFC 9309 needs only the first
    500 KiB). ``html_only`` refuses other types before their first byte is downloaded."""

    def __init__(self, max_bytes: int, html_only: bool = False, cut_off: bool = False) -> None:
        self.max_bytes = max_bytes
        self.html_only = html_only
        self.cut_off = cut_off
        self.data = bytearray()
        self.was_cut = False

    def start(self, content_type: str) -> None:
        media = content_type.split(";", 1)[0].strip().lower()
        if self.html_only and media and media not in HTML_TYPES:
            raise NotHtml(f"not HTML ({media})")

    def feed(self, data: bytes) -> bool:
        room = self.max_bytes - len(self.data)
        if len(data) <= room:
            self.data += data
            return True
        if not self.cut_off:
            raise FetchError(f"too large (over {size_text(self.max_bytes)})", 200)
        self.data += data[:room]
        self.was_cut = True
        return False


class Unpacker:
    """Passes the body through, or gunzips it when it starts with gzip's magic bytes."""

    def __init__(self) -> None:
        self._head = b""  # the first bytes, until there are enough to look for the magic
        self._decided = False
        self._inflate: zlib._Decompress | None = None

    def pieces(self, chunk: bytes) -> Iterator[bytes]:
        if not self._decided:
            self._head += chunk
            if len(self._head) < len(GZIP_MAGIC):
                return
            self._decided = True
            if self._head.startswith(GZIP_MAGIC):
                self._inflate = zlib.decompressobj(GZIP_WBITS)
            chunk, self._head = self._head, b""
        if self._inflate is None:
            yield chunk
        else:
            yield from self._unpacked(self._inflate, chunk)

    def finish(self) -> Iterator[bytes]:
        """What is left at the end: a body shorter than the magic, or a gzip cut short."""
        if self._head:
            yield self._head
        if self._inflate is not None and not self._inflate.eof:
            raise FetchError("bad gzip data: the file ends too soon", 200)

    @staticmethod
    def _unpacked(inflate: zlib._Decompress, data: bytes) -> Iterator[bytes]:
        try:
            while data and not inflate.eof:
                yield inflate.decompress(data, CHUNK_BYTES)
                data = inflate.unconsumed_tail
        except zlib.error as error:
            raise FetchError(f"bad gzip data: {error}", 200) from None


async def read_body(resp: aiohttp.ClientResponse, reader: BodyReader) -> None:
    """Feed ``reader`` until the body ends or the reader has enough (then stop downloading)."""
    reader.start(resp.headers.get("Content-Type", ""))
    unpacker = Unpacker()
    async for chunk in resp.content.iter_chunked(CHUNK_BYTES):
        if not all(reader.feed(piece) for piece in unpacker.pieces(chunk)):
            return
    all(reader.feed(piece) for piece in unpacker.finish())


def size_text(size: int) -> str:
    """A byte count as people say it: 512 KiB, 10 MiB."""
    return f"{size // MIB} MiB" if size >= MIB else f"{size // 1024} KiB"
