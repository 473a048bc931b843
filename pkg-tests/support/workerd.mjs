// A Worker that imports the built package from this repository, run in workerd (Miniflare):
// .js/.mjs are ES modules, .wasm files become compiled modules, as wrangler bundles them.
import { fileURLToPath } from "node:url";
import { Miniflare } from "miniflare";
import { COMPATIBILITY_DATE } from "../../js/testing.js";

const root = fileURLToPath(new URL("../..", import.meta.url));

/**
 * `scriptPath` (relative to the repository) is the module; `script`, if given, its source;
 * `durableObjects`, if given, its Durable Object bindings (Miniflare's option); `onLog`, if
 * given, takes the Worker's console lines (`{ level, message }`) instead of the terminal.
 */
export function packageWorker({ scriptPath, script, durableObjects, onLog }) {
  return new Miniflare({
    modules: true,
    ...(script === undefined ? {} : { script }),
    scriptPath: fileURLToPath(new URL(`../../${scriptPath}`, import.meta.url)),
    modulesRoot: root,
    modulesRules: [
      { type: "ESModule", include: ["**/*.js", "**/*.mjs"] },
      { type: "CompiledWasm", include: ["**/*.wasm"] },
    ],
    compatibilityDate: COMPATIBILITY_DATE,
    ...(durableObjects === undefined ? {} : { durableObjects }),
    ...(onLog === undefined ? {} : { handleStructuredLogs: (entry) => void onLog(entry) }),
    cf: false,
  });
}
