"""Runs INSIDE a trial's sandbox (standard library only): 127.0.0.1:PORT -> the gateway's socket.

    python3 forwarder.py SOCKET PORT_FILE

The sandbox has no network but its own loopback; an agent CLI expects an HTTP base URL. This
script listens on a free loopback port of the sandbox's network namespace, writes the port to
PORT_FILE, and copies the bytes of every connection to the unix socket of the gateway's
OpenAI face (openai_face.py) and back. It adds no reach: the socket is the only way out.
"""

import asyncio
import os
import sys


async def _pipe(reader, writer):
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
        except Exception:
            pass


async def _main(socket_path, port_file):
    folder = os.open(os.path.dirname(socket_path), os.O_PATH | os.O_DIRECTORY)
    name = os.path.basename(socket_path)

    async def serve(reader, writer):
        try:  # through /proc/self/fd: the path may be longer than AF_UNIX allows (no isolation)
            up_reader, up_writer = await asyncio.open_unix_connection(f"/proc/self/fd/{folder}/{name}")
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    tmp = port_file + ".part"
    with open(tmp, "w") as f:
        f.write(str(port))
    os.replace(tmp, port_file)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(_main(sys.argv[1], sys.argv[2]))
