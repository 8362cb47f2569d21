"""CURVE keys for a conveyor server started with --curve-secret-key / --authorized-keys.

A client needs three Z85 keys: the server's public key (the server's NAME.pub, which
`conveyor serve` also logs at start-up) and its own key pair (a NAME.key from `conveyor keygen`,
whose NAME.pub is listed in the server's authorized-keys file):

    from conveyor_client import Client, load_curve_keys
    with Client(router, pub, **load_curve_keys("server.pub", "alice.key")) as c: ...

A server that does not know the client's key answers nothing: requests time out and no events
arrive (CURVE refusals are silent by design).
"""
import zmq
from zmq.utils import z85


def _read(path, what):
    try:
        with open(path, encoding="utf-8") as f:
            return [line.strip() for line in f]
    except OSError as e:
        raise ValueError("cannot read %s %s: %s; write one with `conveyor keygen`"
                         % (what, path, e.strerror or e)) from None


def _is_z85(key):
    try:
        z85.decode(key.encode("ascii"))
        return True
    except (KeyError, ValueError, UnicodeEncodeError):
        return False


def _check_key(key, path):
    if len(key) != 40:
        raise ValueError("%s: %r is not a 40-character Z85 key; use a file from `conveyor keygen`"
                         % (path, key))
    if not _is_z85(key):
        raise ValueError("%s: %r is not Z85; use a file from `conveyor keygen`" % (path, key))
    return key


def load_curve_keys(server_public_file, client_key_file):
    """The Client/AsyncClient keyword arguments curve_server_key, curve_public_key and
    curve_secret_key, read from the server's .pub file and the client's .key file."""
    server_key = None
    for line in _read(server_public_file, "server public key file"):
        token = line.split()[0] if line else ""
        if len(token) == 40 and _is_z85(token):  # Z85 has '#' and '=': test for a key first
            server_key = token
            break
        if token.startswith(("secret-key", "public-key")):
            break
        if token and not token.startswith("#"):
            _check_key(token, server_public_file)
    if server_key is None:
        raise ValueError("%s is not a public key file; pass the server's NAME.pub (one key)"
                         % server_public_file)
    fields = {}
    for line in _read(client_key_file, "client key file"):
        name, eq, value = line.partition("=")
        if eq:
            fields[name.strip()] = value.strip()
    if "secret-key" not in fields:
        raise ValueError("%s has no `secret-key = <z85>` line; pass the client's NAME.key from "
                         "`conveyor keygen`, not its .pub" % client_key_file)
    secret = _check_key(fields["secret-key"], client_key_file)
    public = zmq.curve_public(secret.encode("ascii")).decode("ascii")
    return {"curve_server_key": server_key, "curve_public_key": public, "curve_secret_key": secret}


def check_curve(server_key, public_key, secret_key):
    """None (CURVE off) or the three keys as bytes; ValueError when only some are given."""
    given = [k is not None for k in (server_key, public_key, secret_key)]
    if not any(given):
        return None
    if not all(given):
        raise ValueError("curve_server_key, curve_public_key and curve_secret_key go together: "
                         "give all three (see load_curve_keys) or none")
    return tuple(k.encode("ascii") if isinstance(k, str) else k
                 for k in (server_key, public_key, secret_key))


def apply_curve(sock, keys):
    """Makes sock a CURVE client (before connect); keys from check_curve (None: no-op)."""
    if keys is None:
        return
    sock.curve_serverkey, sock.curve_publickey, sock.curve_secretkey = keys
