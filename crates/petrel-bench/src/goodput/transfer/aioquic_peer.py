#!/usr/bin/env python3
"""The aioquic side of `petrel bench goodput` (hq-interop file download).

hq-interop (the QUIC interop runner's HTTP/0.9 profile, ALPN "hq-interop"): the
client opens a bidirectional stream, sends b"GET /payload\\r\\n" and FIN; the
server answers with the file's bytes and FIN, or resets the stream.

  server --cert C --key K --file F --port P [--cc reno|cubic]
      Serves F (read once at start) as /payload on 127.0.0.1:P until killed.
  client --ca C --port P --out FILE [--cc reno|cubic] [--timeout S]
      Fetches /payload, writing each chunk to FILE as it arrives (the benchmark
      times the download by the file's growth and checks its content).

Both sides allow 16 MiB of connection and stream flow-control credit.
Exit status 0 on success; 1 with a message on stderr otherwise.
"""

import argparse
import asyncio
import sys

from aioquic.asyncio import QuicConnectionProtocol, connect, serve
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import StreamDataReceived

ALPN = "hq-interop"
SERVER_NAME = "localhost"
REQUEST = b"GET /payload\r\n"
WINDOW = 16 << 20
# hq-interop defines no error codes; any non-zero code tells the peer "refused".
REFUSED = 0x1


def configuration(args, is_client):
    config = QuicConfiguration(
        is_client=is_client,
        alpn_protocols=[ALPN],
        congestion_control_algorithm=args.cc,
        max_data=WINDOW,
        max_stream_data=WINDOW,
    )
    if is_client:
        config.server_name = SERVER_NAME
    return config


def make_server(body):
    class HqServer(QuicConnectionProtocol):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            # Request bytes per stream until FIN, bounded by the length of REQUEST.
            self._requests = {}

        def quic_event_received(self, event):
            if not isinstance(event, StreamDataReceived):
                return
            sid = event.stream_id
            request = self._requests.get(sid, b"") + event.data
            if len(request) > len(REQUEST) or sid & 0x2:
                self._quic.reset_stream(sid, REFUSED)
                self.transmit()
                return
            if not event.end_stream:
                self._requests[sid] = request
                return
            self._requests.pop(sid, None)
            if request != REQUEST:
                self._quic.reset_stream(sid, REFUSED)
            else:
                self._quic.send_stream_data(sid, body, end_stream=True)
            self.transmit()

    return HqServer


async def run_server(args):
    with open(args.file, "rb") as f:
        body = f.read()
    config = configuration(args, False)
    config.load_cert_chain(args.cert, args.key)
    await serve("127.0.0.1", args.port, configuration=config, create_protocol=make_server(body))
    # Runs until the benchmark kills the process.
    await asyncio.Event().wait()
    return 0


async def run_client(args):
    config = configuration(args, True)
    config.load_verify_locations(cafile=args.ca)
    async with connect("127.0.0.1", args.port, configuration=config) as client:
        reader, writer = await client.create_stream()
        writer.write(REQUEST)
        writer.write_eof()
        with open(args.out, "wb", buffering=0) as out:
            while chunk := await reader.read(1 << 16):
                out.write(chunk)
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    roles = parser.add_subparsers(dest="role", required=True)
    server = roles.add_parser("server")
    server.add_argument("--cert", required=True)
    server.add_argument("--key", required=True)
    server.add_argument("--file", required=True)
    server.add_argument("--port", type=int, required=True)
    server.add_argument("--cc", choices=["reno", "cubic"], default="cubic")
    client = roles.add_parser("client")
    client.add_argument("--ca", required=True)
    client.add_argument("--port", type=int, required=True)
    client.add_argument("--out", required=True)
    client.add_argument("--cc", choices=["reno", "cubic"], default="cubic")
    client.add_argument("--timeout", type=float, default=600.0, help="seconds")
    args = parser.parse_args()
    try:
        if args.role == "server":
            return asyncio.run(run_server(args))
        return asyncio.run(asyncio.wait_for(run_client(args), args.timeout))
    except Exception as error:  # reported to the benchmark through stderr and exit status
        print("aioquic_peer %s: %s: %s" % (args.role, type(error).__name__, error), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
