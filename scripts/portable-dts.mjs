// Rewrites wasm-bindgen's declarations in the package's builds (pkg*/sluicegate.d.ts and
// pkg*/sluicegate_bg.wasm.d.ts) so that they name no DOM-only type: RequestInfo,
// BufferSource and the WebAssembly namespace become the structural types of js/platform.d.ts.
// Run by scripts/build.sh after each wasm-pack build; running it twice changes nothing.
// Fails when a declaration still names one of them (a newer wasm-bindgen that writes them
// differently), rather than shipping declarations that Node and Worker projects cannot compile.
//   node scripts/portable-dts.mjs pkg pkg-edge pkg-smartflow pkg-sim
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const REPLACEMENTS = [
  ["RequestInfo | URL | Response | BufferSource | WebAssembly.Module", "FetchInput | Response | BufferSourceLike | WasmModule"],
  ["BufferSource | WebAssembly.Module", "BufferSourceLike | WasmModule"],
  ["WebAssembly.Module", "WasmModule"],
  ["WebAssembly.Memory", "WasmMemory"],
  ["WebAssembly.Table", "WasmTable"],
];
const IMPORTED = ["BufferSourceLike", "FetchInput", "WasmMemory", "WasmModule", "WasmTable"];
const MARK = 'from "../js/platform.js";';
// Names a declaration may not use: RequestInfo and BufferSource (the DOM's) and the
// WebAssembly namespace, in code; wasm-bindgen's doc comments may still say "{RequestInfo}".
const FORBIDDEN = /\b(RequestInfo|BufferSource|WebAssembly\.)(?![\w])/;
const isComment = (line) => /^\s*(\/\*|\*|\/\/)/.test(line);

const dirs = process.argv.slice(2);
if (dirs.length === 0) {
  console.error("usage: node scripts/portable-dts.mjs DIR…");
  process.exit(2);
}
let failed = false;
for (const dir of dirs) {
  for (const name of ["sluicegate.d.ts", "sluicegate_bg.wasm.d.ts"]) {
    const file = join(dir, name);
    if (!existsSync(file)) continue;
    const lines = readFileSync(file, "utf8")
      .split("\n")
      .map((line) => (isComment(line) ? line : REPLACEMENTS.reduce((l, [from, to]) => l.split(from).join(to), line)));
    let text = lines.join("\n");
    const used = IMPORTED.filter((type) => new RegExp(`\\b${type}\\b`).test(text));
    if (used.length > 0 && !text.includes(MARK)) {
      text = text.replace(/^((?:\/\*.*\*\/\n)*)/, `$1import type { ${used.join(", ")} } ${MARK}\n`);
    }
    for (const line of text.split("\n")) {
      const left = isComment(line) ? null : FORBIDDEN.exec(line);
      if (left) {
        console.error(`portable-dts: ${file} still names ${left[1]}: ${line.trim()}`);
        failed = true;
      }
    }
    writeFileSync(file, text);
  }
}
process.exit(failed ? 1 : 0);
