"""The Python `mcp` 2.3 peer behind OAuth for `cargo xtask interop`: an MCPServer that is its
own authorization server (the SDK's routes: metadata, dynamic registration, authorize, token,
revoke, protected resource metadata), with an in-memory provider that approves at once.

    python py_oauth_server.py PORT TTL   # Streamable HTTP on 127.0.0.1:PORT/mcp
    python py_oauth_server.py PORT TTL TLS_PORT DIR

With TLS_PORT and DIR the authorization server's issuer is https://127.0.0.1:TLS_PORT: the
same application is served there over TLS too, with a certificate signed by a throwaway
certificate authority written to DIR/ca.pem (the client trusts it with SSL_CERT_FILE), while
the MCP endpoint stays plain http on PORT. That is the set-up in which a proxy must tunnel
the OAuth requests and may forward the MCP ones.

Registration is strict as the SDK makes it: a client may only be authorized for the scopes it
registered (`offline_access` included). Access tokens live TTL seconds; refresh tokens rotate.
Each refresh is printed to stderr as `refreshed`, so the check can see that one happened.
"""
import secrets
import sys
import time

from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions, RevocationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

PORT = int(sys.argv[1])
TTL = int(sys.argv[2])
TLS_PORT = int(sys.argv[3]) if len(sys.argv) > 4 else None
TLS_DIR = sys.argv[4] if len(sys.argv) > 4 else None
BASE = f"http://127.0.0.1:{PORT}"
ISSUER = f"https://127.0.0.1:{TLS_PORT}" if TLS_PORT else BASE


def certificates(directory):
    """A certificate authority (DIR/ca.pem) and a certificate it signed for 127.0.0.1
    (DIR/server.pem, DIR/server.key)."""
    import datetime
    import ipaddress
    import os

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    valid = (now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=1))

    def name(common):
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(name("toolwire interop CA"))
        .issuer_name(name("toolwire interop CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(valid[0])
        .not_valid_after(valid[1])
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (
        x509.CertificateBuilder()
        .subject_name(name("127.0.0.1"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(valid[0])
        .not_valid_after(valid[1])
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage([x509.OID_SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    os.makedirs(directory, exist_ok=True)
    pem = serialization.Encoding.PEM
    with open(os.path.join(directory, "server.key"), "wb") as f:
        f.write(
            key.private_bytes(
                pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
    with open(os.path.join(directory, "server.pem"), "wb") as f:
        f.write(leaf.public_bytes(pem))
    # Written last: its presence says the others are there.
    with open(os.path.join(directory, "ca.pem"), "wb") as f:
        f.write(ca.public_bytes(pem))


class Provider:
    def __init__(self):
        self.clients = {}
        self.codes = {}
        self.access = {}
        self.refresh = {}

    async def get_client(self, client_id):
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull):
        self.clients[client_info.client_id] = client_info

    async def authorize(self, client, params: AuthorizationParams):
        code = secrets.token_urlsafe(16)
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or [],
            expires_at=time.time() + 300,
            client_id=client.client_id,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
        )
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(self, client, authorization_code):
        return self.codes.get(authorization_code)

    def _issue(self, client_id, scopes, resource):
        access = secrets.token_urlsafe(24)
        refresh = secrets.token_urlsafe(24)
        self.access[access] = AccessToken(
            token=access,
            client_id=client_id,
            scopes=scopes,
            expires_at=int(time.time()) + TTL,
            resource=resource,
        )
        self.refresh[refresh] = RefreshToken(
            token=refresh, client_id=client_id, scopes=scopes, resource=resource
        )
        return OAuthToken(
            access_token=access,
            expires_in=TTL,
            scope=" ".join(scopes),
            refresh_token=refresh,
        )

    async def exchange_authorization_code(self, client, authorization_code):
        self.codes.pop(authorization_code.code, None)
        return self._issue(client.client_id, authorization_code.scopes, authorization_code.resource)

    async def load_refresh_token(self, client, refresh_token):
        return self.refresh.get(refresh_token)

    async def exchange_refresh_token(self, client, refresh_token, scopes):
        # Rotation: the refresh token spent is gone.
        self.refresh.pop(refresh_token.token, None)
        print("refreshed", file=sys.stderr, flush=True)
        return self._issue(client.client_id, scopes or refresh_token.scopes, refresh_token.resource)

    async def load_access_token(self, token):
        found = self.access.get(token)
        if found is None or (found.expires_at and found.expires_at < time.time()):
            return None
        return found

    async def revoke_token(self, token):
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)


app = MCPServer(
    "py-oauth-peer",
    auth_server_provider=Provider(),
    auth=AuthSettings(
        issuer_url=ISSUER,
        resource_server_url=f"{BASE}/mcp",
        client_registration_options=ClientRegistrationOptions(
            enabled=True,
            valid_scopes=["mcp:tools", "offline_access"],
            default_scopes=["mcp:tools"],
        ),
        revocation_options=RevocationOptions(enabled=True),
        required_scopes=["mcp:tools"],
    ),
)


@app.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def serve_both():
    """The app on PORT in plain http, and again on TLS_PORT over TLS for the OAuth routes
    (without the lifespan, which the MCP endpoint's session manager runs once)."""
    import asyncio
    import os

    import uvicorn

    certificates(TLS_DIR)
    starlette_app = app.streamable_http_app(host="127.0.0.1")
    plain = uvicorn.Server(uvicorn.Config(starlette_app, host="127.0.0.1", port=PORT))
    tls = uvicorn.Server(
        uvicorn.Config(
            starlette_app,
            host="127.0.0.1",
            port=TLS_PORT,
            lifespan="off",
            ssl_certfile=os.path.join(TLS_DIR, "server.pem"),
            ssl_keyfile=os.path.join(TLS_DIR, "server.key"),
        )
    )
    await asyncio.gather(plain.serve(), tls.serve())


if __name__ == "__main__":
    if TLS_PORT:
        import anyio

        anyio.run(serve_both)
    else:
        app.run(transport="streamable-http", host="127.0.0.1", port=PORT)
