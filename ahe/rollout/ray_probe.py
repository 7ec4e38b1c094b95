"""Is a Ray cluster answering at `--ray-address`, asked in seconds before `ray.init` is.

`ray.init` given an address where nothing listens retries the GCS for minutes, printing only
Ray's own warnings (a wrong port looked like a hang). So the driver first opens a TCP
connection to the address, then speaks the first bytes of HTTP/2 (RFC 9113 §3.4: the
client preface, to which any gRPC server, as Ray's GCS and client server are, answers with a
SETTINGS frame). A closed port, an unreachable host, or a port of something else (the
dashboard's 8265 is the usual mix-up) then fails with one sentence naming the address.
"""

from __future__ import annotations

import os
import socket

from ahe.errors import AheError

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"  # + an empty SETTINGS frame
SETTINGS = 0x04
HOW = ("check that the Ray head runs there (`ray start --head` prints the address to give: its GCS port, "
       "6379 unless --port was set) and that this machine can reach it")


def split_address(address: str) -> tuple[str, int, bool]:
    """(host, port, client) of `host:port` or `ray://host:port`; one sentence for anything else."""
    client = address.startswith("ray://")
    rest = address[len("ray://"):] if client else address
    host, sep, port = rest.rpartition(":")
    host = host.strip("[]")  # [::1]:6379
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise AheError(f"--ray-address {address}: give host:port (the head's GCS address, e.g. 10.0.0.5:6379), "
                       "ray://host:10001, or auto")
    return host, int(port), client


def resolve_auto(given: str) -> str | None:
    """The address `auto` stands for (RAY_ADDRESS, else the cluster last started on this
    machine); one sentence when Ray finds none; None when Ray's lookup itself is not there."""
    try:
        from ray._private.services import canonicalize_bootstrap_address
    except ImportError:  # an internal API that moved: ray.init resolves it, after no probe
        return None
    try:
        return canonicalize_bootstrap_address("auto")
    except ConnectionError as exc:  # "Could not find any running Ray instance …"
        first = (str(exc).strip().splitlines() or [""])[0]
        raise AheError(f"--ray-address {given}: no Ray cluster found on this machine ({first}); start one with "
                       "`ray start --head`, or give the head's address (host:port, or ray://host:10001)") from None
    except Exception:  # anything else: ray.init decides, bounded
        return None


def probe(address: str | None, timeout: float = 5.0) -> None:
    """Raise AheError (one sentence naming the address and what to check) unless a gRPC server
    answers at `address` within about `timeout` seconds. `auto` is probed at what it resolves to;
    a loopback address also where Ray will really connect (it swaps 127.0.0.1 for the machine's
    own address)."""
    given = address or "auto"
    if given in ("auto", "local"):
        found = resolve_auto(given)
        if found is None:
            return
        target, shown = found, f"{given} (found {found})"
    else:
        target, shown = given, given
    host, port, client = split_address(target)
    _probe_one(host, port, client, shown, timeout)
    real = None if client or target != given else ray_target(target)
    if real and real != target:
        rhost, rport, _ = split_address(real)
        try:
            _probe_one(rhost, rport, False, shown, timeout)
        except AheError:
            raise AheError(f"--ray-address {shown}: Ray connects to {real} instead (it replaces a loopback address by "
                           f"this machine's own) and no Ray head answers there; give the address `ray start --head` "
                           "printed") from None


def ray_target(address: str) -> str | None:
    """The host:port `ray.init(address)` will connect to, or None when Ray's helper is not there."""
    try:
        from ray._private.services import canonicalize_bootstrap_address

        return canonicalize_bootstrap_address(address)
    except Exception:
        return None


def _probe_one(host: str, port: int, client: bool, shown: str, timeout: float) -> None:
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except socket.gaierror as exc:
        raise AheError(f"--ray-address {shown}: cannot resolve host {host} ({exc.strerror}); check the name") from None
    except (TimeoutError, socket.timeout):
        raise AheError(f"--ray-address {shown}: no answer from {host}:{port} within {timeout:g}s; {HOW} "
                       "(a firewall may drop the connection)") from None
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        raise AheError(f"--ray-address {shown}: nothing listens at {host}:{port} ({why}); {HOW}") from None
    with sock:
        if os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true"):
            return  # a TLS cluster: the preface would be spoken to a TLS handshake
        if not _speaks_grpc(sock, timeout):
            what = "a Ray client server (ray://host:10001, started by `ray start --head`)" if client else "a Ray head's GCS port"
            raise AheError(f"--ray-address {shown}: {host}:{port} answers but is not {what} "
                           "(the dashboard's 8265 is not it); " + HOW)


def _speaks_grpc(sock: socket.socket, timeout: float) -> bool:
    """Whether the server answers the HTTP/2 preface with a SETTINGS frame."""
    sock.settimeout(timeout)
    try:
        sock.sendall(PREFACE)
        head = b""
        while len(head) < 9:
            chunk = sock.recv(9 - len(head))
            if not chunk:
                return False
            head += chunk
    except OSError:
        return False
    return head[3] == SETTINGS


def check_ray_flags(executor: str | None, ray_address: str | None) -> None:
    """--ray-address with --executor local would be ignored: refuse it, so trials meant for a
    cluster never run on this machine unnoticed."""
    if executor == "local" and ray_address:
        raise AheError(f"--ray-address {ray_address} is only used with --executor ray: add --executor ray to run "
                       "the trials on that cluster, or drop --ray-address to run them on this machine")
