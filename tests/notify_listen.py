#!/usr/bin/env python3
"""notify_listen.py SOCKET OUT — systemd's side of sd_notify for the tests:
binds an AF_UNIX datagram socket at SOCKET and appends every state line it
receives to OUT (one line per state, flushed at once) until killed."""
import os
import socket
import sys

path, out = sys.argv[1], sys.argv[2]
if os.path.exists(path):
    os.unlink(path)
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(path)
with open(out, "a", buffering=1) as f:
    f.write("LISTENING\n")
    while True:
        msg = s.recv(4096).decode("utf-8", "replace")
        for line in msg.split("\n"):
            if line:
                f.write(line + "\n")
