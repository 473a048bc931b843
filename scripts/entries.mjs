// The package's entry files, generated from one table: per entry, its wasm build and the
// names it makes public (from the wasm and from the JS wrappers), and from those the
// per-environment shims (browser and bundlers, Node, Cloudflare Workers), the `exports` map
// and `sideEffects` of package.json, and each entry's declarations. Each shim exports the
// named public API only: a wasm class or function the table does not name stays internal
// (the wrappers import it from the wasm glue directly); the browser shims put it behind
// init()'s guard (js/init.js). Also the stand-ins that throw where an entry cannot run
// (STAND_INS), with the export names of the module they stand in for, read from it.
//
// The declarations have one source per layer: the JSDoc of js/*.js (compiled by tsc with
// tsconfig.json, which type-checks the JavaScript as it goes) and, for what the wasm reads
// and writes, the Rust side's typescript_custom_section blocks (in pkg*/sluicegate.d.ts).
// `--types` compiles them into types/ and writes types/entries/*.d.ts: the table's values,
// and every type the entry's modules declare. No declaration is written by hand.
//
//   node scripts/entries.mjs          write the files
//   node scripts/entries.mjs --check  exit 1, naming each file that differs (npm test runs this)
//   node scripts/entries.mjs --types  compile the declarations into types/ (scripts/build.sh,
//                                     after the wasm builds; exit 1 on a type error)
//
// Edit the table, then run it; never edit a generated file by hand.
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

/** `export { names } from "module";`, one name per line past biome.json's line width, as the formatter writes it. */
function exportFrom(names, module) {
  const line = `export { ${names.join(", ")} } from "${module}";`;
  if (line.length <= LINE_WIDTH) return line;
  return `export {\n${names.map((n) => `  ${n},\n`).join("")}} from "${module}";`;
}

const LINE_WIDTH = 180; // biome.json's formatter.lineWidth

/**
 * One entry per wasm-backed import path. `wasm`: the public names of its wasm build (the
 * rest of the build's exports are internal); `js`: wrapper module → its public names;
 * `types`: modules whose named types the entry's API takes or returns (so that every type a
 * declaration names can be imported, and TypeDoc documents it); `node`: extra set-up in the
 * Node shim.
 */
export const ENTRIES = [
  {
    subpath: ".",
    base: "",
    pkg: "pkg",
    label: "sluicegate",
    what: "the browser client: pacer, location cache, batches, Open-Meteo weights",
    wasm: ["chooseLocationsPerCall", "classifyRateLimit", "openMeteoQueryWeight", "openMeteoWeight"],
    js: {
      "./pacer.js": ["Pacer"],
      "./pacer-core.js": ["PacerCore"],
      "./cache.js": ["LocationCache"],
      "./batch.js": ["runBatch"],
      "./forecasts.js": ["fetchForecasts"],
    },
    // what a pacer's and a cache's persistence options take
    types: { "./platform.js": ["IDBFactoryLike", "LockManagerLike", "StorageLike"] },
  },
  {
    subpath: "./edge",
    base: "edge",
    pkg: "pkg-edge",
    label: "sluicegate/edge",
    what: "rules validation, client identity, token bucket",
    wasm: ["clientIdentity", "validateRules"],
    js: { "./token-bucket.js": ["TokenBucket"] },
  },
  {
    subpath: "./limit",
    base: "limit",
    pkg: "pkg-limit",
    label: "sluicegate/limit",
    what: "keyed limits and their headers, a build of their own",
    wasm: [],
    js: { "./limit.js": ["Limiter"] },
  },
  {
    subpath: "./smartflow",
    base: "smartflow",
    pkg: "pkg-smartflow",
    label: "sluicegate/smartflow",
    what: "the Smart Flow limiter",
    // SmartFlowCore and SmartFlowBucket are the spec's pure parts (time passed in), and the
    // url and cache helpers its named functions: what the conformance vectors exercise
    wasm: ["SmartFlowBucket", "SmartFlowCore", "formatSavedAt", "isCacheFresh", "isUnresolvedScopedUrl", "parseSavedAt", "urlIdentifiers"],
    js: { "./smartflow.js": ["SmartFlow", "fileStore", "parseRetryAfter", "smartFetch"] },
    // what smartFetch takes
    types: { "./platform.js": ["FetchInput"] },
    // the cache file store (the `path` option, fileStore) and the default cache file: only
    // this entry touches node:fs
    node: {
      imports: ['import { installFileStore } from "./smartflow.js";', 'import { defaultCachePath, fileStore } from "./smartflow-file.js";'],
      setup: "installFileStore(fileStore, defaultCachePath);",
    },
  },
  {
    subpath: "./sim",
    base: "sim",
    pkg: "pkg-sim",
    label: "sluicegate/sim",
    what: "the policy simulator",
    wasm: [],
    js: {
      "./sim.js": ["SimulationError", "checkConfig", "compareSimulations", "edgeRulesPath", "inlineEdgeRules", "runSimulation", "selfTest", "simulate"],
    },
  },
];

/** Under Node, the Workers-only entries are an error naming what to use there: ESM for import (a stand-in, below), CommonJS for require. */
const workersOnlyNode = (base) => ({ import: `./js/${base}-node.js`, require: "./js/workers-only.cjs" });
const WORKERS_ONLY_MESSAGE =
  "sluicegate/worker and sluicegate/hono run in Cloudflare Workers only: they import their .wasm as a module, which Node cannot load. " +
  "In Node use sluicegate/middleware (Express, or Hono on Node) or sluicegate/limit; to run your Worker in Node's tests, startEdge({ main }) from sluicegate/testing (or wrangler dev).";

/** Anywhere but Node, sluicegate/testing is an error naming where it runs. */
const NODE_ONLY_MESSAGE =
  "sluicegate/testing runs under Node (>= 22.12) only: it starts the edge in workerd through Miniflare. " +
  "Run the tests that use it with Node (node --test, or Vitest's node environment), not in a page or a Worker.";

/**
 * The ES modules that stand in for an entry where it cannot run: each exports the names of the
 * module it stands in for (read from that module, below) and a default, so that every import
 * form links, `import { createEdge } from …` as much as `import * as …`; evaluating it then
 * throws the message (a named import cannot be caught before linking, and a SyntaxError about
 * a missing export would hide the message). Each export throws it too when called or
 * constructed. A bundler keeps the throw: they are listed in sideEffects.
 */
const STAND_INS = [
  { file: "js/worker-node.js", mirrors: "js/worker.js", where: 'sluicegate/worker imported under Node (package.json\'s "node" condition)', message: WORKERS_ONLY_MESSAGE },
  { file: "js/hono-node.js", mirrors: "js/hono.js", where: 'sluicegate/hono imported under Node (package.json\'s "node" condition)', message: WORKERS_ONLY_MESSAGE },
  { file: "js/node-only.js", mirrors: "js/testing.js", where: 'sluicegate/testing anywhere but Node (package.json\'s "default" condition)', message: NODE_ONLY_MESSAGE },
];

/** A module that only throws `message`, headed by `comment` (its lines). */
const throwing = (comment, message) => [...comment.map((line) => `// ${line}`), `// ${GENERATED}`, "throw new Error(", `  ${JSON.stringify(message)},`, ");", ""].join("\n");

/**
 * The names the ES module `rel` exports (its export statements, read by TypeScript's parser):
 * the one list its stand-in copies.
 */
function exportNames(ts, rel) {
  const source = ts.createSourceFile(rel, readFileSync(path.join(ROOT, rel), "utf8"), ts.ScriptTarget.Latest, false, ts.ScriptKind.JS);
  const has = (node, kind) => ts.canHaveModifiers(node) && (ts.getModifiers(node) ?? []).some((m) => m.kind === kind);
  const names = [];
  for (const statement of source.statements) {
    if (ts.isExportDeclaration(statement)) {
      if (statement.isTypeOnly) continue;
      const clause = statement.exportClause;
      if (!clause || !ts.isNamedExports(clause)) throw new Error(`entries: ${rel} re-exports a whole module (export *): name its exports, so that its stand-in can list them`);
      names.push(...clause.elements.filter((e) => !e.isTypeOnly).map((e) => e.name.text));
    } else if (ts.isExportAssignment(statement) || has(statement, ts.SyntaxKind.DefaultKeyword)) {
      names.push("default");
    } else if (has(statement, ts.SyntaxKind.ExportKeyword)) {
      const declared = ts.isVariableStatement(statement) ? statement.declarationList.declarations.map((d) => d.name) : [statement.name];
      for (const name of declared) {
        if (!name || !ts.isIdentifier(name)) throw new Error(`entries: ${rel} exports a destructured or unnamed declaration: give it a name, so that its stand-in can list it`);
        names.push(name.text);
      }
    }
  }
  if (names.length === 0) throw new Error(`entries: ${rel} exports nothing`);
  return names;
}

/** A stand-in's text (see STAND_INS), exporting `names` and a default. */
function standIn({ mirrors, where, message }, names) {
  const exported = [...new Set([...names, "default"])].map((name) => `unavailable as ${name}`);
  const exports = `export { ${exported.join(", ")} };`;
  return [
    `// ${where}, where it cannot run.`,
    `// It exports the names of ${mirrors} (and a default), so that every import form links;`,
    "// evaluating it then throws an error that says where to go instead (as each export does if called).",
    `// ${GENERATED}`,
    "function unavailable() {",
    "  throw new Error(",
    `    ${JSON.stringify(message)},`,
    "  );",
    "}",
    "",
    exports.length <= LINE_WIDTH ? exports : `export {\n${exported.map((e) => `  ${e},\n`).join("")}};`,
    "",
    "unavailable();",
    "",
  ].join("\n");
}

/** Their types: the entry's, and for require() (CommonJS) those of that error's module. */
const workersOnlyTypes = (types) => ({ import: types, require: "./types/workers-only.d.cts" });

/** Import paths without a wasm build of their own, as package.json lists them. */
const PLAIN = {
  "./middleware": { types: "./types/middleware.d.ts", node: "./js/middleware.js", default: "./js/middleware.js" },
  // Workers only: under Node (import or require) an error that names what to use there
  "./worker": { types: workersOnlyTypes("./types/worker.d.ts"), workerd: "./js/worker.js", worker: "./js/worker.js", node: workersOnlyNode("worker"), default: "./js/worker.js" },
  "./hono": { types: workersOnlyTypes("./types/hono.d.ts"), workerd: "./js/hono.js", worker: "./js/hono.js", node: workersOnlyNode("hono"), default: "./js/hono.js" },
  // Node only (the edge in workerd through Miniflare, for tests): elsewhere an error that says so
  "./testing": { types: "./types/testing.d.ts", node: "./js/testing.js", default: "./js/node-only.js" },
};

/** Modules with effects on import besides the shims that instantiate a build. */
// (the entries that throw, too: a bundler would drop a module "without effects" and its throw)
const ALSO_SIDE_EFFECTS = ["./js/worker.js", ...STAND_INS.map((s) => `./${s.file}`), "./js/workers-only.cjs"];

const GENERATED = "Generated by scripts/entries.mjs from its table: edit the table, not this file.";
const BUNDLERS = 'Vite 7 and older: optimizeDeps: { exclude: ["sluicegate"] }; esbuild: pass the URL of the .wasm imported from "…/wasm" (docs/browser.md, Bundlers).';

const file = (e, env) => `js/${e.base ? `${e.base}-${env}` : env}.js`;
const typesFile = (e) => `types/entries/${e.base || "index"}.d.ts`;

function exportLines(e) {
  const lines = [];
  if (e.wasm.length > 0) lines.push(exportFrom(e.wasm, `../${e.pkg}/sluicegate.js`));
  for (const [module, names] of Object.entries(e.js)) lines.push(exportFrom(names, module));
  return lines;
}

/** The name a wrapper module is imported under in a browser shim: `./token-bucket.js` → `tokenBucket`. */
const namespaceOf = (module) => path.basename(module, ".js").replace(/-(\w)/g, (_, c) => c.toUpperCase());

/**
 * The browser shim's exports: each of the table's names behind init()'s guard (js/init.js),
 * `/* @__PURE__ *\/` so that a bundler still drops what a page does not import.
 */
function guardedExportLines(e) {
  const guarded = (name, from) => `export const ${name} = /* @__PURE__ */ requires(${from}.${name}, "${name}");`;
  return [...e.wasm.map((name) => guarded(name, "wasm")), ...Object.entries(e.js).flatMap(([module, names]) => names.map((name) => guarded(name, namespaceOf(module))))];
}

function browser(e) {
  return [
    `// ${e.label} (${e.what}). Browsers and bundlers: the web build as is; \`await init()\``,
    `// loads the .wasm (the bundler copies it as an asset). ${BUNDLERS}`,
    "// Until init() has resolved, every export throws an error naming init() (js/init.js).",
    `// ${GENERATED}`,
    `import * as wasm from "../${e.pkg}/sluicegate.js";`,
    ...Object.keys(e.js).map((module) => `import * as ${namespaceOf(module)} from "${module}";`),
    'import { browserEntry } from "./init.js";',
    "",
    `const { init, requires } = browserEntry(wasm.default, "${e.label}");`,
    "",
    ...guardedExportLines(e),
    "export default init;",
    "",
  ].join("\n");
}

function node(e) {
  return [
    `// ${e.label} (${e.what}). Node: read the .wasm beside the web build and instantiate it`,
    "// synchronously, so the exports work straight after import (a later `await init()` is a no-op).",
    `// ${GENERATED}`,
    `import { initSync } from "../${e.pkg}/sluicegate.js";`,
    'import { readWasm } from "./node-wasm.js";',
    ...(e.node?.imports ?? []),
    "",
    `initSync({ module: readWasm(new URL("../${e.pkg}/sluicegate_bg.wasm", import.meta.url), "${e.label}") });`,
    ...(e.node?.setup ? [e.node.setup] : []),
    "",
    ...exportLines(e),
    `export { default } from "../${e.pkg}/sluicegate.js";`,
    "",
  ].join("\n");
}

function workerd(e) {
  return [
    `// ${e.label} (${e.what}). Cloudflare Workers: wasm cannot be compiled from bytes at run`,
    "// time there, so import the module (wrangler hands over a compiled WebAssembly.Module) and",
    "// instantiate it.",
    `// ${GENERATED}`,
    `import wasm from "../${e.pkg}/sluicegate_bg.wasm";`,
    `import { initSync } from "../${e.pkg}/sluicegate.js";`,
    "",
    "initSync({ module: wasm });",
    "",
    ...exportLines(e),
    `export { default } from "../${e.pkg}/sluicegate.js";`,
    "",
  ].join("\n");
}

function packageJson(current) {
  const pkg = JSON.parse(current);
  const exports = {};
  for (const e of ENTRIES) {
    exports[e.subpath] = {
      types: `./${typesFile(e)}`,
      workerd: `./${file(e, "workerd")}`,
      worker: `./${file(e, "workerd")}`,
      node: `./${file(e, "node")}`,
      default: `./${file(e, "browser")}`,
    };
  }
  Object.assign(exports, PLAIN);
  for (const e of ENTRIES) {
    exports[e.subpath === "." ? "./wasm" : `${e.subpath}/wasm`] = { types: "./types/wasm.d.ts", default: `./${e.pkg}/sluicegate_bg.wasm` };
  }
  // the rules file's JSON Schema, for a rules file's "$schema" and for editors
  exports["./schema/rules.json"] = "./schema/rules.json";
  exports["./schema/sim-config.json"] = "./schema/sim-config.json";
  exports["./package.json"] = "./package.json";
  pkg.types = `./${typesFile(ENTRIES[0])}`;
  pkg.exports = exports;
  pkg.sideEffects = [...ENTRIES.flatMap((e) => [`./${file(e, "node")}`, `./${file(e, "workerd")}`]), ...ALSO_SIDE_EFFECTS];
  return `${JSON.stringify(pkg, null, 2)}\n`;
}

/** Every generated file: path → its text. */
export async function generate() {
  const { default: ts } = await import("typescript");
  const out = new Map();
  for (const e of ENTRIES) {
    out.set(file(e, "browser"), browser(e));
    out.set(file(e, "node"), node(e));
    out.set(file(e, "workerd"), workerd(e));
  }
  out.set("package.json", packageJson(readFileSync(path.join(ROOT, "package.json"), "utf8")));
  // the stand-ins and the CommonJS module each throw themselves: on Node 20 an ES module
  // importing a CommonJS one that throws leaves an uncaught error behind even when the import
  // is caught
  for (const s of STAND_INS) out.set(s.file, standIn(s, exportNames(ts, s.mirrors)));
  const required = 'sluicegate/worker and sluicegate/hono required under Node (package.json\'s "node" condition): an error';
  out.set("js/workers-only.cjs", throwing([required, "that says where to go instead."], WORKERS_ONLY_MESSAGE));
  return out;
}

const WASM_URL_TYPES = `// sluicegate/wasm, sluicegate/edge/wasm, sluicegate/smartflow/wasm, sluicegate/sim/wasm: each
// entry's .wasm file, for bundlers that copy an imported file and hand over its URL
// (esbuild's \`--loader:.wasm=file\`), to pass to init():
//   import wasm from "sluicegate/wasm";
//   await init({ module_or_path: new URL(wasm, import.meta.url) });
// ${GENERATED}

/** The .wasm file's URL, relative to the bundle, as the bundler's file loader gives it. */
declare const url: string;
export default url;
`;

/** Whether a declaration's JSDoc says `@internal`: it stays out of the declarations. */
function isInternal(ts, node) {
  const original = ts.getOriginalNode(node);
  return ts.getJSDocTags(original).some((tag) => tag.tagName.text === "internal");
}

/** A declaration transformer dropping `@internal` statements and class members (tsc's stripInternal reads no JSDoc of .js sources). */
const stripInternal = (ts) => (context) => (root) => {
  const visit = (node) => {
    if (isInternal(ts, node)) return undefined;
    return ts.isClassDeclaration(node) ? ts.visitEachChild(node, visit, context) : node;
  };
  return ts.visitEachChild(root, visit, context);
};

/** The names `module` exports as types only (interfaces and type aliases, JSDoc typedefs included), but `@internal` ones. */
function typeNames(ts, checker, sourceFile) {
  const symbol = checker.getSymbolAtLocation(sourceFile);
  if (!symbol) return [];
  const typeOnly = ts.SymbolFlags.Interface | ts.SymbolFlags.TypeAlias;
  return checker
    .getExportsOfModule(symbol)
    .filter((s) => s.flags & typeOnly && !(s.flags & ts.SymbolFlags.Value))
    .filter((s) => !(s.declarations ?? []).some((d) => ts.getJSDocTags(d).some((tag) => tag.tagName.text === "internal")))
    .map((s) => s.name)
    .sort();
}

const typeExportFrom = (names, module) => exportFrom(names, module).replace(/^export \{/, "export type {");

/** One entry's declarations: the table's values and every type of its wasm build and its modules. */
function entryTypes(e, types) {
  const pkg = `../../${e.pkg}/sluicegate.js`;
  const lines = [`// ${e.label} (${e.what}).`, `// ${GENERATED}`];
  if (e.wasm.length > 0) lines.push(exportFrom(e.wasm, pkg));
  const wasmTypes = types.get(e.pkg);
  if (wasmTypes.length > 0) lines.push(typeExportFrom(wasmTypes, pkg));
  lines.push(`export { default } from "${pkg}";`);
  for (const [module, names] of Object.entries(e.js)) {
    const from = `.${module}`;
    lines.push(exportFrom(names, from));
    // a module's alias of a build's type (js/limit.js's LimiterOptions) is that type, exported once
    const own = types.get(module.slice(2, -3)).filter((name) => !names.includes(name) && !wasmTypes.includes(name));
    if (own.length > 0) lines.push(typeExportFrom(own, from));
  }
  for (const [module, names] of Object.entries(e.types ?? {})) lines.push(typeExportFrom(names, `.${module}`));
  return `${lines.join("\n")}\n`;
}

/** Compiles js/*.js's JSDoc into types/ and writes the entries' declarations; false on a type error. */
async function buildTypes() {
  const { default: ts } = await import("typescript");
  const host = { getCanonicalFileName: (f) => f, getCurrentDirectory: () => ROOT, getNewLine: () => "\n" };
  const report = (diagnostics) => console.error(ts.formatDiagnosticsWithColorAndContext(diagnostics, host));
  const configPath = path.join(ROOT, "tsconfig.json");
  const parsed = ts.getParsedCommandLineOfConfigFile(configPath, {}, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: (d) => report([d]) });
  if (!parsed) return false;
  if (parsed.errors.length > 0) {
    report(parsed.errors);
    return false;
  }
  const pkgs = [...new Set(ENTRIES.map((e) => e.pkg))];
  const program = ts.createProgram({
    rootNames: [...parsed.fileNames, ...pkgs.map((pkg) => path.join(ROOT, pkg, "sluicegate.d.ts"))],
    options: parsed.options,
  });
  const diagnostics = ts.getPreEmitDiagnostics(program);
  if (diagnostics.length > 0) {
    report(diagnostics);
    console.error(`types: ${diagnostics.length} type error(s) in js/ (tsconfig.json); no declarations written`);
    return false;
  }
  const outDir = path.join(ROOT, "types");
  rmSync(outDir, { recursive: true, force: true });
  const emitted = program.emit(undefined, undefined, undefined, true, { afterDeclarations: [stripInternal(ts)] });
  if (emitted.diagnostics.length > 0) {
    report(emitted.diagnostics);
    return false;
  }
  // A module whose every export is @internal (js/dashboard-assets.js) declares nothing: no file.
  for (const name of readdirSync(outDir)) {
    const file = path.join(outDir, name);
    if (name.endsWith(".d.ts") && readFileSync(file, "utf8").trim() === "") rmSync(file);
  }
  const checker = program.getTypeChecker();
  const types = new Map();
  for (const sourceFile of program.getSourceFiles()) {
    const rel = path.relative(ROOT, sourceFile.fileName);
    const js = /^js\/([\w-]+)\.js$/.exec(rel);
    if (js) types.set(js[1], typeNames(ts, checker, sourceFile));
    const pkg = /^(pkg[\w-]*)\/sluicegate\.d\.ts$/.exec(rel);
    if (pkg) types.set(pkg[1], typeNames(ts, checker, sourceFile));
  }
  mkdirSync(path.join(outDir, "entries"), { recursive: true });
  for (const e of ENTRIES) writeFileSync(path.join(ROOT, typesFile(e)), entryTypes(e, types));
  writeFileSync(path.join(outDir, "wasm.d.ts"), WASM_URL_TYPES);
  writeFileSync(
    path.join(outDir, "workers-only.d.cts"),
    `// sluicegate/worker and sluicegate/hono required under Node: it throws, naming what to use there.\n// ${GENERATED}\nexport {};\n`,
  );
  const count = readdirSync(outDir).filter((name) => name.endsWith(".d.ts")).length;
  console.log(`types: ${count} module declarations from js/ and ${ENTRIES.length} entries written to types/`);
  return true;
}

/** Declarations written by hand in js/: there are none (they are compiled from JSDoc). */
const handWritten = () => readdirSync(path.join(ROOT, "js")).filter((name) => name.endsWith(".d.ts"));

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  if (process.argv.includes("--types")) process.exit((await buildTypes()) ? 0 : 1);
  const check = process.argv.includes("--check");
  const stale = [];
  for (const [rel, text] of await generate()) {
    const full = path.join(ROOT, rel);
    let current = null;
    try {
      current = readFileSync(full, "utf8");
    } catch {}
    if (current === text) continue;
    if (check) stale.push(rel);
    else writeFileSync(full, text);
  }
  if (check && stale.length > 0) {
    console.error(`entries: out of date (run node scripts/entries.mjs): ${stale.join(", ")}`);
    process.exit(1);
  }
  if (check && handWritten().length > 0) {
    console.error(`entries: declarations come from JSDoc (node scripts/entries.mjs --types), not from js/${handWritten().join(", js/")}`);
    process.exit(1);
  }
  if (check) console.log(`entries: ${ENTRIES.length} entries × 3 environments and package.json are current; no declaration written by hand`);
}
