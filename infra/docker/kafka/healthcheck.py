"""Healthy once the broker answers an ApiVersions request on its internal listener.

A bare TCP connect succeeds before the broker serves; a JVM tool per check would cost a
core-second every few seconds. This is the Kafka protocol's smallest request, by hand.
"""

import socket
import struct
import sys

API_VERSIONS, VERSION, CORRELATION = 18, 0, 7
client = b"healthcheck"
request = struct.pack(">hhih", API_VERSIONS, VERSION, CORRELATION, len(client)) + client
try:
    with socket.create_connection(("127.0.0.1", 9092), timeout=3) as sock:
        sock.sendall(struct.pack(">i", len(request)) + request)
        (size,) = struct.unpack(">i", sock.recv(4))
        reply = sock.recv(size)
        correlation, error = struct.unpack(">ih", reply[:6])
except (OSError, struct.error) as exc:
    sys.exit(f"broker not serving: {exc}")
sys.exit(0 if correlation == CORRELATION and error == 0 else f"ApiVersions error {error}")
