"""The escape tests' loopback listener counts only connections that carry its token
(tests/adversarial/listener.py): a stray connection from another process is logged, not counted."""

from __future__ import annotations

import socket
import subprocess

from tests.adversarial.listener import TokenListener, connect_command


def test_a_connection_without_the_token_is_logged_with_its_peer_and_not_counted():
    listener = TokenListener()
    strays = [socket.create_connection(("127.0.0.1", listener.port), timeout=3) for _ in range(5)]  # a deep queue
    strays[0].sendall(b"GET / HTTP/1.0\r\n\r\n")
    for s in strays:
        s.close()
    assert listener.close() is False
    assert len(listener.others) == 5 and "GET /" in " ".join(listener.others)
    assert all(o.startswith("127.0.0.1:") for o in listener.others)  # each logged with its peer
    assert "5 other connection(s) not counted" in listener.note()


def test_the_attacks_connection_carries_the_token_and_counts():
    listener = TokenListener()
    with socket.create_connection(("127.0.0.1", listener.port), timeout=3) as stray:
        stray.sendall(b"x")
    out = subprocess.run(["sh", "-c", connect_command(listener)], capture_output=True, text=True, timeout=30).stdout
    assert listener.close() is True
    assert len(listener.carried) == 1 and len(listener.others) == 1
    assert listener.CONNECTED in out and listener.CONNECTED not in connect_command(listener)
