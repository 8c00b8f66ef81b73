#!/usr/bin/env python3
"""tcp_proxy.py TARGET_PORT PORT_FILE — a TCP proxy on 127.0.0.1 for tests.

Listens on a free port of 127.0.0.1 (written to PORT_FILE once listening)
and forwards every connection to 127.0.0.1:TARGET_PORT.  Stopping it with
SIGSTOP stalls every connection through it while the kernel keeps
accepting and ACKing: a hung path, not a closed one.
"""
import asyncio
import sys


async def pipe(reader, writer):
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        try:
            writer.close()
        except OSError:
            pass


async def main():
    target, port_file = int(sys.argv[1]), sys.argv[2]

    async def handle(cr, cw):
        try:
            sr, sw = await asyncio.open_connection('127.0.0.1', target)
        except OSError:
            cw.close()
            return
        await asyncio.gather(pipe(cr, sw), pipe(sr, cw))

    server = await asyncio.start_server(handle, '127.0.0.1', 0)
    port = server.sockets[0].getsockname()[1]
    with open(port_file + '.tmp', 'w') as f:
        f.write(f'{port}\n')
    import os
    os.rename(port_file + '.tmp', port_file)
    async with server:
        await server.serve_forever()


asyncio.run(main())
