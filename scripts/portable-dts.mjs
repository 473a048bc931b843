// Rewrites wasm-bindgen's declarations in the package's builds (pkg*/sluicegate.d.ts) so that
// they name no DOM-only type: RequestInfo, BufferSource and the WebAssembly namespace become
// the structural types that src/wasm/mod.rs declares in the same file (its TS_HOST section).
// Run by scripts/build.sh after each wasm-pack build; running it twice changes nothing.
// Fails when a declaration still names one of them (a newer wasm-bindgen that writes them
// differently), or names a structural type the file does not declare, rather than shipping
// declarations that Node and Worker projects cannot compile.
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
const DECLARED = ["BufferSourceLike", "FetchInput", "WasmMemory", "WasmModule", "WasmTable"];
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
  const file = join(dir, "sluicegate.d.ts");
  if (!existsSync(file)) {
    console.error(`portable-dts: ${file} missing (build it first)`);
    failed = true;
    continue;
  }
  const text = readFileSync(file, "utf8")
    .split("\n")
    .map((line) => (isComment(line) ? line : REPLACEMENTS.reduce((l, [from, to]) => l.split(from).join(to), line)))
    .join("\n");
  for (const type of DECLARED) {
    if (new RegExp(`\\b${type}\\b`).test(text) && !new RegExp(`^type ${type}\\b`, "m").test(text)) {
      console.error(`portable-dts: ${file} names ${type} but does not declare it (src/wasm/mod.rs's TS_HOST section)`);
      failed = true;
    }
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
process.exit(failed ? 1 : 0);
