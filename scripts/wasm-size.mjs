// The packages' wasm sizes against their budgets, and where the bytes go.
//
//   node scripts/wasm-size.mjs           each package's .wasm, raw and gzip -9, against its
//                                        budget; exit 1 when one is over (npm test runs this)
//   node scripts/wasm-size.mjs --top     also the 15 largest functions and data of each
//                                        (twiggy's `top`), from the names build.sh keeps
//   node scripts/wasm-size.mjs --docs    write those tables into docs/benchmarks.md's size section
//
// Budgets are gzip -9 bytes (1 KB = 1,000 bytes): what a page or a Worker upload pays.
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

/** Each package's wasm and its budget (gzip -9 bytes), and why that number. */
export const BUDGETS = [
  {
    label: "worker (deploy)",
    wasm: "worker/pkg/sluicegate_worker_bg.wasm",
    budget: 243_500,
    why: "what a deploy uploads: 215 KB, 4.5 KB for the stores a rule may pick (the Cloudflare binding, the isolate), 15 KB for its decisions' stats (each isolate's recorder, the stats object's minutes, the stats and dashboard routes, the Analytics Engine data points) and 9 KB for rolling limits out (enforce in the rules and tenant stages, Sluicegate-Shadow, the would-refuse counts, the admin API's /v1/rules and the store of its overrides)",
  },
  {
    label: "sluicegate",
    wasm: "pkg/sluicegate_bg.wasm",
    budget: 56_000,
    why: "a page's pacer (over rolling windows or the upstream's fixed ones) and Open-Meteo's query reader: at most 56 KB",
  },
  {
    label: "sluicegate/edge",
    wasm: "pkg-edge/sluicegate_bg.wasm",
    budget: 130_000,
    why: "127,412 bytes (sluicegate/limit's token buckets packed 16 bytes a slot, a table beside the other algorithms') + 2 %",
  },
  { label: "sluicegate/limit", wasm: "pkg-limit/sluicegate_bg.wasm", budget: 30_000, why: "the keyed limits alone: at most 30 KB" },
  { label: "sluicegate/smartflow", wasm: "pkg-smartflow/sluicegate_bg.wasm", budget: 80_000, why: "at most 80 KB" },
  {
    label: "sluicegate/sim",
    wasm: "pkg-sim/sluicegate_bg.wasm",
    budget: 311_200,
    why: "the edge's own pipeline in the replay: its pre-read, rules and tenant stages, which requests are timing-limited, each rule's store over locations and isolates, and the refusals of rules and tenant limits in shadow counted apart (305,065 bytes) + 2 %",
  },
];

/** Bytes after `gzip -9`, as scripts/build.sh reports them (zlib's level 9 packs a little worse). */
const gzipped = (file) => execFileSync("gzip", ["-9", "-c", file], { maxBuffer: 64 << 20 }).length;
const thousands = (n) => n.toLocaleString("en-US");

/** Reads an unsigned LEB128 at `at`: [value, next offset]. */
function leb(bytes, at) {
  let value = 0;
  let shift = 0;
  for (;;) {
    const byte = bytes[at++];
    value += (byte & 0x7f) * 2 ** shift;
    if (byte < 0x80) return [value, at];
    shift += 7;
  }
}

/** The module's sections: { id, name (custom sections), start, end } of each payload. */
function sections(bytes) {
  const out = [];
  for (let at = 8; at < bytes.length; ) {
    const id = bytes[at];
    const [size, start] = leb(bytes, at + 1);
    let name = null;
    if (id === 0) {
      const [length, from] = leb(bytes, start);
      name = new TextDecoder().decode(bytes.subarray(from, from + length));
    }
    out.push({ id, name, start, end: start + size });
    at = start + size;
  }
  return out;
}

/** Function index → name, from the "name" custom section. */
function functionNames(bytes, section) {
  const names = new Map();
  if (!section) return names;
  let [length, at] = leb(bytes, section.start);
  at += length; // the section's own name
  while (at < section.end) {
    const kind = bytes[at];
    const [size, start] = leb(bytes, at + 1);
    if (kind === 1) {
      let [count, p] = leb(bytes, start);
      for (; count > 0; count--) {
        let index;
        let nameLength;
        [index, p] = leb(bytes, p);
        [nameLength, p] = leb(bytes, p);
        names.set(index, new TextDecoder().decode(bytes.subarray(p, p + nameLength)));
        p += nameLength;
      }
    }
    at = start + size;
  }
  return names;
}

/** How many of the imports are functions (they come first in the function index space). */
function importedFunctions(bytes, section) {
  if (!section) return 0;
  let [count, at] = leb(bytes, section.start);
  let functions = 0;
  const skipName = (p) => {
    const [length, from] = leb(bytes, p);
    return from + length;
  };
  for (; count > 0; count--) {
    at = skipName(skipName(at));
    const kind = bytes[at++];
    if (kind === 0) {
      functions++;
      [, at] = leb(bytes, at);
    } else if (kind === 1) {
      at += 1; // reftype
      const flags = bytes[at++];
      [, at] = leb(bytes, at);
      if (flags & 1) [, at] = leb(bytes, at);
    } else if (kind === 2) {
      const flags = bytes[at++];
      [, at] = leb(bytes, at);
      if (flags & 1) [, at] = leb(bytes, at);
    } else if (kind === 3) {
      at += 2; // valtype, mutability
    } else {
      [, at] = leb(bytes, at + 1); // a tag: attribute, type index
    }
  }
  return functions;
}

/** A Rust symbol without its hash, shortened for a table. */
function shortName(name) {
  const plain = name
    .replace(/::h[0-9a-f]{16}$/, "")
    .replace(/\[[0-9a-f]{16}\]/g, "")
    .replace(/\|/g, "\\|");
  return plain.length > 100 ? `${plain.slice(0, 97)}…` : plain;
}

/** The largest items of a module with a name section: functions' bodies and data segments. */
export function topItems(bytes, count = 15) {
  const all = sections(bytes);
  const names = functionNames(
    bytes,
    all.find((s) => s.id === 0 && s.name === "name"),
  );
  const imported = importedFunctions(
    bytes,
    all.find((s) => s.id === 2),
  );
  const items = [];
  const code = all.find((s) => s.id === 10);
  if (code) {
    let [n, at] = leb(bytes, code.start);
    for (let i = 0; i < n; i++) {
      const [size, body] = leb(bytes, at);
      const index = imported + i;
      items.push({ name: shortName(names.get(index) ?? `code[${index}]`), size: body + size - at });
      at = body + size;
    }
  }
  const data = all.find((s) => s.id === 11);
  if (data) items.push({ name: "data (strings, tables and constants)", size: data.end - data.start });
  items.sort((a, b) => b.size - a.size);
  return items.slice(0, count);
}

/** The module as build.sh ships it but with its names kept, from the copy build.sh keeps before wasm-opt. */
function namedBuild(wasm) {
  const kept = path.join(ROOT, "target/wasm-names", wasm.replace(/\//g, "__"));
  if (!existsSync(kept)) throw new Error(`${kept} missing: run bash scripts/build.sh first`);
  const dir = mkdtempSync(path.join(tmpdir(), "wasm-size-"));
  try {
    const out = path.join(dir, "named.wasm");
    const flags = readFileSync(path.join(ROOT, "scripts/build.sh"), "utf8")
      .match(/WASM_OPT_FLAGS=\(([^)]*)\)/)[1]
      .split(/\s+/)
      .filter(Boolean);
    execFileSync(path.join(ROOT, "node_modules/.bin/wasm-opt"), [...flags, "--debuginfo", kept, "-o", out]);
    return readFileSync(out);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function table(budget, shipped, gz) {
  const named = namedBuild(budget.wasm);
  const rows = topItems(named).map((item) => `| ${thousands(item.size)} | ${((100 * item.size) / shipped.length).toFixed(1)} % | \`${item.name}\` |`);
  return [
    `**${budget.label}** (${thousands(shipped.length)} bytes raw, ${thousands(gz)} gzip -9)`,
    "",
    "| bytes | of the file | item |",
    "| ---: | ---: | --- |",
    ...rows,
    "",
  ].join("\n");
}

/** The size section of the guide's benchmarks page, which `--docs` writes. */
const DOCS_PAGE = "docs/benchmarks.md";
const DOCS_BEGIN = "<!-- wasm-size: generated by node scripts/wasm-size.mjs --docs -->";
const DOCS_END = "<!-- /wasm-size -->";

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const top = process.argv.includes("--top");
  const docs = process.argv.includes("--docs");
  let over = 0;
  const tables = [];
  for (const budget of BUDGETS) {
    const file = path.join(ROOT, budget.wasm);
    if (!existsSync(file)) {
      console.error(`wasm-size: ${budget.wasm} missing: run bash scripts/build.sh first`);
      process.exit(1);
    }
    const bytes = readFileSync(file);
    const gz = gzipped(file);
    const ok = gz <= budget.budget;
    if (!ok) over++;
    console.log(`${ok ? "ok  " : "OVER"} ${budget.label}: ${thousands(gz)} bytes gzip -9 (${thousands(bytes.length)} raw), budget ${thousands(budget.budget)} (${budget.why})`);
    if (top || docs) tables.push(table(budget, bytes, gz));
  }
  if (top) console.log(`\n${tables.join("\n")}`);
  if (docs) {
    const file = path.join(ROOT, DOCS_PAGE);
    const text = readFileSync(file, "utf8");
    const start = text.indexOf(DOCS_BEGIN);
    const end = text.indexOf(DOCS_END);
    if (start < 0 || end < start) {
      console.error(`wasm-size: ${DOCS_PAGE} has no ${DOCS_BEGIN} … ${DOCS_END} section`);
      process.exit(1);
    }
    writeFileSync(file, `${text.slice(0, start + DOCS_BEGIN.length)}\n${tables.join("\n")}${text.slice(end)}`);
  }
  if (over > 0) {
    console.error(`wasm-size: ${over} package(s) over budget`);
    process.exit(1);
  }
}
