#!/usr/bin/env python3
"""An hq-interop peer built on aioquic, for petrel-quic's interop test.

hq-interop (the QUIC interop runner's HTTP/0.9 profile, ALPN "hq-interop"): the
client opens a bidirectional stream, sends b"GET /<path>\\r\\n" and FIN; the server
answers with the body and FIN, or resets the stream.

Both roles serve or fetch b"GET /pattern/<seed>/<size>\\r\\n": <size> bytes made of
SHA-256(seed as 8 bytes big-endian || block index as 8 bytes big-endian) blocks,
truncated. The Rust test builds the same bytes to compare against.

  server --cert C --key K [--host H] [--port P]
      Listens (P=0 picks a free port) and prints "LISTENING <port>" on stdout.
  client --ca C --port P --path /pattern/1/4194304 --out FILE [--host H]
      Fetches the path, writes the body to FILE, prints "<length> <sha256 hex>".

Exit status 0 on success; 1 with a message on stderr otherwise.
"""

import argparse
import asyncio
import hashlib
import socket
import sys

from aioquic.asyncio import QuicConnectionProtocol, connect, serve
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import StreamDataReceived

ALPN = "hq-interop"
SERVER_NAME = "localhost"
# A request line is short; anything longer is refused rather than buffered.
MAX_REQUEST_BYTES = 1024
MAX_BODY_BYTES = 64 << 20
# hq-interop defines no error codes; any non-zero code tells the peer "refused".
REFUSED = 0x1


def pattern(seed: int, size: int) -> bytes:
    prefix = seed.to_bytes(8, "big")
    blocks = (size + 31) // 32
    body = b"".join(
        hashlib.sha256(prefix + index.to_bytes(8, "big")).digest()
        for index in range(blocks)
    )
    return body[:size]


def parse_request(request: bytes):
    """(seed, size) for a well-formed pattern request, else None."""
    if not request.endswith(b"\r\n"):
        return None
    words = request[:-2].split(b" ")
    if len(words) != 2 or words[0] != b"GET":
        return None
    segments = words[1].split(b"/")
    if len(segments) != 4 or segments[0] != b"" or segments[1] != b"pattern":
        return None
    seed, size = segments[2], segments[3]
    if not (seed.isdigit() and size.isdigit()):
        return None
    seed, size = int(seed), int(size)
    if seed >= 1 << 64 or size > MAX_BODY_BYTES:
        return None
    return seed, size


class HqServer(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # Request bytes per stream until FIN; None once the stream was refused.
        # Bounded by the peer's stream limit (aioquic grants 128 bidi streams).
        self._requests = {}

    def quic_event_received(self, event):
        if not isinstance(event, StreamDataReceived):
            return
        stream_id = event.stream_id
        pending = self._requests.get(stream_id, b"")
        if pending is None:
            return
        if stream_id & 0x2:
            self._refuse(stream_id, "request on a unidirectional stream")
            return
        request = pending + event.data
        if len(request) > MAX_REQUEST_BYTES:
            self._refuse(stream_id, "request longer than %d bytes" % MAX_REQUEST_BYTES)
            return
        if not event.end_stream:
            self._requests[stream_id] = request
            return
        self._requests.pop(stream_id, None)
        parsed = parse_request(request)
        if parsed is None:
            self._refuse(stream_id, "malformed request %r" % request[:64])
            return
        self._quic.send_stream_data(stream_id, pattern(*parsed), end_stream=True)
        self.transmit()

    def _refuse(self, stream_id, reason):
        print("aioquic_peer: stream %d refused: %s" % (stream_id, reason), file=sys.stderr)
        self._requests[stream_id] = None
        if not stream_id & 0x2:
            # Only a bidirectional stream has a direction for the response to reset.
            self._quic.reset_stream(stream_id, REFUSED)
        self._quic.stop_stream(stream_id, REFUSED)
        self.transmit()


def free_udp_port(host: str) -> int:
    # aioquic's serve() offers no public way to read back the port it bound, so
    # ask the kernel for a free one first; the window before serve() rebinds is tiny.
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


async def run_server(args) -> int:
    configuration = QuicConfiguration(is_client=False, alpn_protocols=[ALPN])
    configuration.load_cert_chain(args.cert, args.key)
    port = args.port or free_udp_port(args.host)
    server = await serve(
        args.host, port, configuration=configuration, create_protocol=HqServer
    )
    print("LISTENING %d" % port, flush=True)
    try:
        # Runs until the test kills the process.
        await asyncio.Event().wait()
    finally:
        server.close()
    return 0


async def run_client(args) -> int:
    configuration = QuicConfiguration(
        is_client=True, alpn_protocols=[ALPN], server_name=SERVER_NAME
    )
    configuration.load_verify_locations(cafile=args.ca)
    async with connect(args.host, args.port, configuration=configuration) as client:
        reader, writer = await client.create_stream()
        writer.write(b"GET %s\r\n" % args.path.encode("ascii"))
        writer.write_eof()
        chunks, length = [], 0
        while chunk := await reader.read(1 << 16):
            length += len(chunk)
            if length > MAX_BODY_BYTES:
                print("aioquic_peer: body over %d bytes" % MAX_BODY_BYTES, file=sys.stderr)
                return 1
            chunks.append(chunk)
        body = b"".join(chunks)
    with open(args.out, "wb") as out:
        out.write(body)
    print("%d %s" % (len(body), hashlib.sha256(body).hexdigest()), flush=True)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    roles = parser.add_subparsers(dest="role", required=True)
    server = roles.add_parser("server")
    server.add_argument("--cert", required=True)
    server.add_argument("--key", required=True)
    server.add_argument("--host", default="127.0.0.1")
    server.add_argument("--port", type=int, default=0)
    client = roles.add_parser("client")
    client.add_argument("--ca", required=True)
    client.add_argument("--host", default="127.0.0.1")
    client.add_argument("--port", type=int, required=True)
    client.add_argument("--path", required=True)
    client.add_argument("--out", required=True)
    client.add_argument("--timeout", type=float, default=30.0, help="seconds")
    args = parser.parse_args()
    try:
        if args.role == "server":
            return asyncio.run(run_server(args))
        return asyncio.run(asyncio.wait_for(run_client(args), args.timeout))
    except Exception as error:  # reported to the test through stderr and exit status
        print("aioquic_peer %s: %s: %s" % (args.role, type(error).__name__, error), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
