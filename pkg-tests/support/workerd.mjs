// A Worker that imports the built package from this repository, run in workerd (Miniflare):
// .js/.mjs are ES modules, .wasm files become compiled modules, as wrangler bundles them.
import { fileURLToPath } from "node:url";
import { Miniflare } from "miniflare";
import { COMPATIBILITY_DATE } from "../../worker/testing.mjs";

const root = fileURLToPath(new URL("../..", import.meta.url));

/** `scriptPath` (relative to the repository) is the module; `script`, if given, its source. */
export function packageWorker({ scriptPath, script }) {
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
    cf: false,
  });
}
