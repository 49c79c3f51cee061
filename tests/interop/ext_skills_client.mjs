// A host's side of the Skills extension with its own SDK's client (@olaservo/ext-skills/client on the v2
// TypeScript client), as its README shows: gate on the declaration, list, get each skill, read it and each
// of its files verified (digest, size and SKILL.md's frontmatter: the SDK throws on any mismatch), walk its
// folder, build the catalog. Prints one JSON summary; exits non-zero on any error.
//
//   node ext_skills_client.mjs legacy|auto COMMAND [ARGS...]     (the server, over stdio)

import { load } from "./node_packages.mjs";

const { Client } = await load("@modelcontextprotocol/client", ".");
const { StdioClientTransport } = await load("@modelcontextprotocol/client", "./stdio");
const skills = await load("@olaservo/ext-skills", "./client");

const [mode, command, ...args] = process.argv.slice(2);
const options = mode === "auto" ? { versionNegotiation: { mode: "auto" } } : {};
const client = new Client({ name: "ext-skills-client", version: "1.0.0" }, options);
await client.connect(new StdioClientTransport({ command, args, stderr: "ignore" }));
const summary = {
  protocolVersion: client.getNegotiatedProtocolVersion(),
  supports: skills.serverSupportsSkills(client),
  directoryRead: skills.serverSupportsDirectoryRead(client),
  skills: {},
};
for (const listed of await skills.listSkills(client)) {
  const entry = await skills.getSkill(client, listed.uri);
  await skills.readSkill(client, entry);
  const verified = [entry.uri];
  for (const file of entry.resources) {
    if (file.uri === entry.uri) continue;
    await skills.readSkillResource(client, entry, file.uri);
    verified.push(file.uri);
  }
  const walked = await skills.walkDirectory(client, entry.uri.slice(0, -"/SKILL.md".length));
  summary.skills[entry.uri] = { verified, walked: walked.map((r) => r.uri) };
}
const { catalog } = await skills.discoverAndBuildCatalog(client, { serverName: "gateway" });
summary.catalog = catalog;
await client.close();
console.log(JSON.stringify(summary));
