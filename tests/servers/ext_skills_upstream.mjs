// An upstream serving a skill folder with the Skills extension's own SDK (@olaservo/ext-skills, the
// TypeScript SDK of modelcontextprotocol/ext-skills, pinned in interop/package.json), written as its README
// tells a server author to: discoverSkills() then registerSkillResources() on a v2 McpServer, built in a
// factory given to the v2 SDK's era-aware entry points (2025 eras and 2026-07-28 alike).
//
//   node ext_skills_upstream.mjs SKILLS_DIR            stdio (serveStdio)
//   node ext_skills_upstream.mjs SKILLS_DIR --http     Streamable HTTP (createMcpHandler) on an ephemeral
//                                                      port; prints {"url": ".../mcp"} as its first stdout line
//
// The SDK serves a snapshot taken by discoverSkills() and announces nothing when the folder changes (its
// README: edits take effect on a restart). Over HTTP the factory is called per request, so this server
// also does what the v2 SDK makes easy there: on a change in the folder, it discovers the skills again and
// publishes notifications/resources/list_changed to the subscriptions/listen streams that asked for it.
// A line "rediscovered N" on stderr says it did.
//
// It lives beside the Python test servers, but its packages are in interop/node_modules (.ci/run installs
// them), which a file outside interop/ cannot import by name: node_packages.mjs imports them by their exports.
import { watch } from "node:fs";
import { createServer } from "node:http";
import { Readable } from "node:stream";

import { load } from "../interop/node_packages.mjs";

const { McpServer, createMcpHandler } = await load("@modelcontextprotocol/server", ".");
const { serveStdio } = await load("@modelcontextprotocol/server", "./stdio");
const { discoverSkills, registerSkillResources } = await load("@olaservo/ext-skills", "./server");

const skillsDir = process.argv[2];
let skillMap = discoverSkills(skillsDir);

function build() {
  const server = new McpServer(
    { name: "ext-skills-upstream", version: "1.0.0" },
    { capabilities: { resources: {} } },
  );
  registerSkillResources(server, skillMap, skillsDir, { template: true, directoryRead: true, ttlMs: 60_000 });
  return server;
}

if (!process.argv.includes("--http")) {
  serveStdio(build);
} else {
  const handler = createMcpHandler(build);
  let pending;
  watch(skillsDir, { recursive: true }, () => {
    clearTimeout(pending); // one rediscovery for the burst of events one edit makes
    pending = setTimeout(() => {
      skillMap = discoverSkills(skillsDir);
      handler.notify.resourcesChanged();
      console.error(`rediscovered ${skillMap.size}`);
    }, 50);
  });
  const http = createServer(async (req, res) => {
    // node:http to the web-standard Request/Response the handler takes (what @modelcontextprotocol/node's
    // toNodeHandler does; that package is not among the peers).
    const aborted = new AbortController();
    res.on("close", () => aborted.abort());
    const headers = new Headers();
    for (const [key, value] of Object.entries(req.headers)) {
      for (const one of [value].flat()) if (one !== undefined) headers.append(key, one);
    }
    const hasBody = req.method !== "GET" && req.method !== "HEAD";
    const request = new Request(`http://${req.headers.host}${req.url}`, {
      method: req.method,
      headers,
      body: hasBody ? Readable.toWeb(req) : undefined,
      duplex: "half",
      signal: aborted.signal,
    });
    try {
      const response = await handler.fetch(request);
      res.writeHead(response.status, Object.fromEntries(response.headers));
      res.flushHeaders();
      if (response.body) for await (const chunk of response.body) res.write(chunk);
    } catch (error) {
      if (!aborted.signal.aborted) console.error(error);
    }
    res.end();
  });
  http.listen(0, "127.0.0.1", () => {
    console.log(JSON.stringify({ url: `http://127.0.0.1:${http.address().port}/mcp` }));
  });
}
