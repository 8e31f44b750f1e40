#!/usr/bin/env python3
"""Reference C KCP peer for Petrel's interop test.

Runs the reference implementation (ikcp.c, via the PyPI package `kcp`) on a UDP socket
and echoes every message back. Each message must be `u32 index (BE) | body` where body
byte j is `(index * 31 + j) & 0xff` and indexes arrive in order 0, 1, 2, ...; anything
else is an error. Loss is injected on both directions with a seeded RNG.

With `--stream-bytes N` the Petrel side runs KCP stream mode instead: what arrives is a
byte stream whose byte k is `(k * 7) % 251`, each received message must be at most one
segment (a stream-mode sender marks every segment as a whole message), every message is
echoed back as it came (the C side stays in message mode), and the run is done after N
bytes.

Prints one JSON line with counters and exits 0 when `--messages` messages were verified
and echoed (then lingers so KCP can retransmit the last echoes), 1 on a verification
error, 2 on timeout.
"""
import argparse
import json
import random
import socket
import struct
import sys
import time

from kcp.extension import KCP


def expected_body(index: int, length: int) -> bytes:
    return bytes(((index * 31 + j) & 0xFF) for j in range(length))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--conv", type=int, required=True)
    ap.add_argument("--peer-port", type=int, required=True)
    ap.add_argument("--messages", type=int, default=1000)
    ap.add_argument("--loss", type=float, default=0.0, help="drop probability per direction")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--mtu", type=int, default=1200)
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--stream-bytes", type=int, default=0,
                    help="verify a byte stream of this many bytes instead of messages")
    args = ap.parse_args()

    rng = random.Random(args.seed)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(0.005)
    peer = ("127.0.0.1", args.peer_port)
    stats = {"datagrams_in": 0, "datagrams_out": 0, "dropped_in": 0, "dropped_out": 0,
             "verified": 0, "echoed": 0}
    mss = args.mtu - 24

    kcp = KCP(args.conv, max_transmission=args.mtu, no_delay=True, update_interval=10,
              resend_count=2, no_congestion_control=True,
              send_window_size=128, receive_window_size=512)

    @kcp.outbound_handler
    def _send(_kcp, data: bytes) -> None:
        if rng.random() < args.loss:
            stats["dropped_out"] += 1
            return
        stats["datagrams_out"] += 1
        sock.sendto(bytes(data), peer)

    # Tell the Rust side our port before any KCP traffic.
    print(json.dumps({"port": sock.getsockname()[1]}), flush=True)

    deadline = time.monotonic() + args.timeout
    done_at = None
    while True:
        now = time.monotonic()
        if now > deadline:
            print(json.dumps({"error": "timeout", **stats}), flush=True)
            return 2
        if done_at is not None and now - done_at > 3.0:
            break
        try:
            data, addr = sock.recvfrom(65536)
            if addr == peer:
                if rng.random() < args.loss:
                    stats["dropped_in"] += 1
                else:
                    stats["datagrams_in"] += 1
                    kcp.receive(data)
        except socket.timeout:
            pass
        for msg in kcp.get_all_received():
            msg = bytes(msg)
            if args.stream_bytes:
                at = stats["verified"]
                expected = bytes(((at + j) * 7) % 251 for j in range(len(msg)))
                if len(msg) > mss or msg != expected:
                    print(json.dumps({"error": f"stream bytes from {at} corrupt or a message "
                                               f"of {len(msg)} bytes", **stats}), flush=True)
                    return 1
                stats["verified"] += len(msg)
                kcp.enqueue(msg)
                stats["echoed"] += 1
                if stats["verified"] == args.stream_bytes:
                    done_at = time.monotonic()
                continue
            if len(msg) < 4:
                print(json.dumps({"error": f"short message of {len(msg)} bytes", **stats}), flush=True)
                return 1
            (index,) = struct.unpack(">I", msg[:4])
            if index != stats["verified"] or msg[4:] != expected_body(index, len(msg) - 4):
                print(json.dumps({"error": f"message {index} out of order or corrupt "
                                           f"(expected index {stats['verified']})", **stats}), flush=True)
                return 1
            stats["verified"] += 1
            kcp.enqueue(msg)
            stats["echoed"] += 1
            if stats["verified"] == args.messages:
                done_at = time.monotonic()
        kcp.update()
    print(json.dumps({"ok": True, **stats}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
