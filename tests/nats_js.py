#!/usr/bin/env python3
"""nats_js.py -- a minimal JetStream admin and reader over the NATS text
protocol, for the integration tests (tests/nats.sh): no NATS client library
is needed to create a stream, count it or read every message back.

  nats_js.py PORT create NAME SUBJECT[,SUBJECT...] [key=JSON ...]
  nats_js.py PORT update NAME SUBJECT[,SUBJECT...] [key=JSON ...]
  nats_js.py PORT info NAME        prints the stream's message count
  nats_js.py PORT dump NAME        one JSON line per message:
                                   {"seq", "subject", "headers", "data", "time"}
  nats_js.py PORT delete NAME
  nats_js.py PORT ready            exits 0 once JetStream answers

NATS_CA (and NATS_CERT, NATS_KEY) speak TLS.  create's keys go into the stream configuration as they are (storage
defaults to "file", e.g. max_msgs=5 discard='"new"' duplicate_window=...
in nanoseconds).  NATS_USER / NATS_PASS or NATS_TOKEN authenticate.
"""
import base64
import json
import os
import socket
import sys


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", int(port)), timeout=10)
        self.buf = b""
        self.inbox = "_INBOX.nats_js.%d" % os.getpid()
        line = self._line()
        if not line.startswith(b"INFO "):
            sys.exit("nats_js: unexpected greeting %r" % line)
        if os.environ.get("NATS_CA"):
            # TLS after the plain INFO, as NATS does.
            import ssl
            ctx = ssl.create_default_context(cafile=os.environ["NATS_CA"])
            if os.environ.get("NATS_CERT"):
                ctx.load_cert_chain(os.environ["NATS_CERT"], os.environ["NATS_KEY"])
            self.s = ctx.wrap_socket(self.s, server_hostname="127.0.0.1")
        opts = {"verbose": False, "pedantic": False, "headers": True,
                "no_responders": True, "lang": "python-raw", "version": "0"}
        if os.environ.get("NATS_USER"):
            opts["user"] = os.environ["NATS_USER"]
            opts["pass"] = os.environ.get("NATS_PASS", "")
        if os.environ.get("NATS_TOKEN"):
            opts["auth_token"] = os.environ["NATS_TOKEN"]
        self.s.sendall(b"CONNECT " + json.dumps(opts).encode() + b"\r\nPING\r\n")
        while True:
            line = self._line()
            if line == b"PONG":
                break
            if line.startswith(b"-ERR"):
                sys.exit("nats_js: %s" % line.decode())
        self.s.sendall(("SUB %s.* 1\r\n" % self.inbox).encode())

    def _fill(self):
        data = self.s.recv(1 << 20)
        if not data:
            sys.exit("nats_js: connection closed")
        self.buf += data

    def _line(self):
        while b"\r\n" not in self.buf:
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _bytes(self, n):
        while len(self.buf) < n + 2:
            self._fill()
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def send(self, subject, payload, tag):
        body = json.dumps(payload).encode() if payload is not None else b""
        self.s.sendall(b"PUB %s %s.%s %d\r\n%s\r\n" % (
            subject.encode(), self.inbox.encode(), str(tag).encode(),
            len(body), body))

    def reply(self):
        """(tag, JSON reply) of the next reply; no responders is an error."""
        while True:
            line = self._line()
            if line == b"PING":
                self.s.sendall(b"PONG\r\n")
                continue
            if line.startswith(b"-ERR"):
                sys.exit("nats_js: %s" % line.decode())
            parts = line.split()
            if parts[0] == b"MSG":
                data = self._bytes(int(parts[-1]))
                tag = parts[1].decode().rsplit(".", 1)[1]
                return tag, json.loads(data) if data else {}
            if parts[0] == b"HMSG":
                data = self._bytes(int(parts[-1]))
                hdr = data[:int(parts[-2])].decode()
                if "503" in hdr.split("\r\n")[0]:
                    sys.exit("nats_js: no responders (is JetStream on?)")
                tag = parts[1].decode().rsplit(".", 1)[1]
                body = data[int(parts[-2]):]
                return tag, json.loads(body) if body else {}

    def request(self, subject, payload=None):
        self.send(subject, payload, "r")
        _, r = self.reply()
        if "error" in r:
            sys.exit("nats_js: %s: %s" % (subject, r["error"]))
        return r


def parse_headers(b64):
    if not b64:
        return {}
    text = base64.b64decode(b64).decode()
    out = {}
    for line in text.split("\r\n")[1:]:
        if not line:
            continue
        k, v = line.split(":", 1)
        out.setdefault(k, []).append(v.strip())
    return {k: v[0] if len(v) == 1 else v for k, v in out.items()}


def main():
    port, cmd = sys.argv[1], sys.argv[2]
    name = sys.argv[3] if len(sys.argv) > 3 else ""
    if cmd == "ready":
        try:
            c = Conn(port)
        except OSError:
            sys.exit(1)
        c.request("$JS.API.INFO")
        return
    c = Conn(port)
    if cmd in ("create", "update"):
        cfg = {"name": name, "subjects": sys.argv[4].split(","),
               "storage": "file", "num_replicas": 1}
        for kv in sys.argv[5:]:
            k, v = kv.split("=", 1)
            cfg[k] = json.loads(v)
        c.request("$JS.API.STREAM.%s.%s" % (cmd.upper(), name), cfg)
    elif cmd == "info":
        print(c.request("$JS.API.STREAM.INFO." + name)["state"]["messages"])
    elif cmd == "delete":
        c.request("$JS.API.STREAM.DELETE." + name)
    elif cmd == "dump":
        st = c.request("$JS.API.STREAM.INFO." + name)["state"]
        first, last = st["first_seq"], st["last_seq"]
        out = sys.stdout
        seq = first
        while seq <= last:
            chunk = list(range(seq, min(last, seq + 999) + 1))
            for q in chunk:
                c.send("$JS.API.STREAM.MSG.GET." + name, {"seq": q}, q)
            got = {}
            for _ in chunk:
                tag, r = c.reply()
                got[int(tag)] = r
            for q in chunk:
                r = got[q]
                if "error" in r:  # deleted or purged
                    continue
                m = r["message"]
                out.write(json.dumps({
                    "seq": m["seq"], "subject": m["subject"],
                    "headers": parse_headers(m.get("hdrs")),
                    "data": base64.b64decode(m.get("data", "")).decode(),
                    "time": m.get("time"),
                }) + "\n")
            seq = chunk[-1] + 1
    else:
        sys.exit("nats_js: unknown command " + cmd)


main()
