// A real OpenID Provider (the certified npm package oidc-provider) for the identity tests.
//
//   node oidc_provider.mjs CONFIG.json
//
// CONFIG.json: {"port": 0 or N, "resource": "<the gateway's MCP URL>", "jwks": {"keys": [private JWKs]},
//               "clients": [{"client_id", "client_secret", "groups": [...], "scope": "..."}],
//               "opaque": false}
// Issues JWT access tokens (RFC 9068) for the resource by client credentials, signed with the given
// keys, with each client's groups as a claim; with "opaque": true, opaque tokens instead, which the
// introspection endpoint (RFC 7662) describes to any of its confidential clients. Prints {"issuer": "..."} as its first stdout line once it
// listens.
import { readFileSync } from "node:fs";
import Provider from "oidc-provider";

const config = JSON.parse(readFileSync(process.argv[2], "utf8"));
const byClient = new Map(config.clients.map((c) => [c.client_id, c]));

async function start(port) {
  const issuer = `http://127.0.0.1:${port}`;
  const provider = new Provider(issuer, {
    clients: config.clients.map((c) => ({
      client_id: c.client_id,
      client_secret: c.client_secret,
      grant_types: ["client_credentials"],
      redirect_uris: [],
      response_types: [],
      scope: c.scope ?? "prompts:read",
    })),
    jwks: config.jwks,
    scopes: ["prompts:read", "prompts:admin"],
    features: {
      devInteractions: { enabled: false },
      introspection: { enabled: true },
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => config.resource,
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx, resource) => {
          if (resource !== config.resource) throw new Error(`unknown resource ${resource}`);
          const accessTokenFormat = config.opaque ? "opaque" : "jwt";
          return { scope: "prompts:read prompts:admin", audience: resource, accessTokenFormat };
        },
      },
    },
    extraTokenClaims: (_ctx, token) => {
      const client = byClient.get(token.clientId);
      return client?.groups ? { groups: client.groups } : {};
    },
  });
  provider.proxy = false;
  const server = provider.listen(port);
  await new Promise((resolve) => server.once("listening", resolve));
  return { issuer: `http://127.0.0.1:${server.address().port}`, server };
}

let { issuer, server } = await start(config.port ?? 0);
if (!config.port) {
  // The issuer URL holds the port, and the provider must know its issuer before it listens: listen
  // once to learn a free port, then start for real on it.
  const port = server.address().port;
  await new Promise((resolve) => server.close(resolve));
  ({ issuer, server } = await start(port));
}
process.stdout.write(JSON.stringify({ issuer }) + "\n");
process.on("SIGTERM", () => server.close(() => process.exit(0)));
