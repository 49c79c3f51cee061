// The packages of interop/package.json (interop/node_modules, which .ci/run installs), imported by their
// exports: a script outside interop/ cannot import them by name.
import { readFileSync } from "node:fs";

const MODULES = new URL("../../interop/node_modules/", import.meta.url);

export async function load(name, subpath) {
  const root = new URL(`${name}/`, MODULES);
  let target = JSON.parse(readFileSync(new URL("package.json", root), "utf8")).exports[subpath];
  while (typeof target === "object") target = target.import ?? target.default;
  return import(new URL(target, root).href);
}
