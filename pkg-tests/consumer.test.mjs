// The package as a user gets it: `npm pack`, then `npm install --offline` of the tarball into
// a scratch project, and everything below runs from that project — the README's quick start
// as written, `sluicegate/testing` (with and without its optional peer dependencies), the
// command line from npx, and every wrong turn's message, under this Node (22) and the
// machine's own (20).
import assert from "node:assert/strict";
import { execFile, execFileSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { ROOT, listen } from "./support/consumer.mjs";
import { readmeSamples, section } from "./support/readme.mjs";

const README = readFileSync(path.join(ROOT, "README.md"), "utf8");
/** The guide's page on testing rules in workerd, whose sample runs here from a project. */
const TESTING_PAGE = readFileSync(path.join(ROOT, "docs", "testing.md"), "utf8");

/** The machine's own Node (the first `node` on PATH outside node_modules/.bin), when it is not this one. */
const SYSTEM_NODE = (() => {
  const dirs = (process.env.PATH ?? "").split(path.delimiter).filter((d) => d && !d.endsWith(`node_modules${path.sep}.bin`));
  for (const dir of dirs) {
    const node = path.join(dir, "node");
    try {
      const version = execFileSync(node, ["--version"], { encoding: "utf8" }).trim();
      return version === process.version ? null : { node, version };
    } catch {}
  }
  return null;
})();

let scratch;
let app;
/** PATH with this Node first: npx and the bin's `#!/usr/bin/env node` run on it. */
const env = { ...process.env, PATH: `${path.dirname(process.execPath)}${path.delimiter}${process.env.PATH}` };

/** Runs `command args` in the project: `{ code, stdout, stderr }`. */
function run(command, args, options = {}) {
  return new Promise((resolve, reject) => {
    execFile(command, args, { cwd: app, env, encoding: "utf8", timeout: 90_000, ...options }, (error, stdout, stderr) => {
      if (error && typeof error.code !== "number") reject(Object.assign(error, { stdout, stderr }));
      else resolve({ code: error ? error.code : 0, stdout, stderr });
    });
  });
}

/** Links one of the repository's packages into the project's node_modules (an installed peer dependency). */
function installPeer(name) {
  symlinkSync(path.join(ROOT, "node_modules", name), path.join(app, "node_modules", name), "dir");
}

before(() => {
  scratch = mkdtempSync(path.join(tmpdir(), "sluicegate-consumer-"));
  const npm = (args, cwd) => execFileSync("npm", [...args, "--offline", "--no-audit", "--no-fund", "--no-update-notifier"], { cwd, env, encoding: "utf8" });
  const [{ filename }] = JSON.parse(npm(["pack", "--json", "--ignore-scripts", "--pack-destination", scratch], ROOT));
  app = path.join(scratch, "app");
  mkdirSync(app);
  writeFileSync(path.join(app, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }));
  npm(["install", "--ignore-scripts", path.join(scratch, filename)], app);
  // sluicegate/testing's optional peer dependencies, as a project that uses it installs them
  installPeer("miniflare");
  installPeer("esbuild");
});
after(() => {
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

/**
 * A sample's `console.log(…); // expected` comments, as patterns for its output lines, in
 * order ("…" stands for anything); null when a console.log has no such comment.
 */
function expectedLines(code) {
  const logs = code.split("\n").filter((line) => /^\s*console\.log\(/.test(line));
  const expected = logs.map((line) => /\);\s*\/\/\s*(.+)$/.exec(line)?.[1]);
  if (expected.some((e) => e === undefined)) return null;
  return expected.map(
    (e) =>
      new RegExp(
        `^${e
          .split("…")
          .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"))
          .join(".*")}$`,
      ),
  );
}

/** Remote APIs (anything but 127.0.0.1) answered by `local`, as a prelude to a sample. */
const redirectFetch = (local) => `const __fetch = globalThis.fetch;
globalThis.fetch = (input, init) => {
  const url = new URL(input instanceof Request ? input.url : String(input));
  if (url.hostname !== "127.0.0.1") input = ${JSON.stringify(local)} + url.pathname + url.search;
  return __fetch(input, init);
};
`;

describe("the quick start, as written, from the installed package", () => {
  let api;
  before(async () => {
    api = await listen((req, res) => {
      const body = req.url.startsWith("/v1/forecast") ? { daily: { time: ["2026-01-01"], temperature_2m_max: [3.1] } } : { pong: true };
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(body));
    });
  });
  after(() => api?.close());

  const quickStart = readmeSamples(section(README, "## Quick start", "README.md"));
  test("it has a sample for the browser, Node and a Worker", () => {
    assert.deepEqual(quickStart.map((s) => s.where.join(" ")).sort(), ["browser", "node workerd", "worker"]);
  });

  // The browser's and Node's samples under Node (the browser's too: `init()` is a no-op there),
  // each printing what its comments say.
  for (const sample of quickStart.filter((s) => !s.where.includes("worker"))) {
    test(`the ${sample.where[0]} sample prints what its comments say`, async () => {
      const file = path.join(app, `quick-${sample.where[0]}.mjs`);
      writeFileSync(file, redirectFetch(api.url) + sample.code);
      const out = await run(process.execPath, [file]);
      assert.equal(out.code, 0, out.stderr);
      const expected = expectedLines(sample.code);
      assert.ok(expected, "every console.log says what it prints");
      const lines = out.stdout.trimEnd().split("\n");
      assert.equal(lines.length, expected.length, out.stdout);
      for (const [i, line] of lines.entries()) assert.match(line, expected[i]);
    });
  }

  test("the Worker sample, run by sluicegate/testing's startEdge({ main }), admits 20 then refuses with Retry-After", { timeout: 90_000 }, async () => {
    const sample = quickStart.find((s) => s.where.includes("worker"));
    writeFileSync(path.join(app, "quick-worker.js"), sample.code);
    const script = `import { startEdge } from "sluicegate/testing";
const edge = await startEdge({ main: "quick-worker.js" });
const answers = [];
for (let i = 0; i < 21; i++) {
  const res = await edge.fetch("/api/hello", { headers: { "cf-connecting-ip": "203.0.113.9" } });
  answers.push([res.status, res.headers.get("retry-after"), res.status === 200 ? await res.json() : await res.text()]);
}
await edge.close();
console.log(JSON.stringify(answers));
`;
    writeFileSync(path.join(app, "run-worker.mjs"), script);
    const out = await run(process.execPath, ["run-worker.mjs"]);
    assert.equal(out.code, 0, out.stderr);
    const answers = JSON.parse(out.stdout);
    for (const [status, , body] of answers.slice(0, 20)) {
      assert.equal(status, 200);
      assert.deepEqual(body, { hello: "/api/hello" });
    }
    assert.equal(answers[20][0], 429);
    assert.ok(Number(answers[20][1]) >= 1, `Retry-After ${answers[20][1]}`);
  });
});

describe("sluicegate/testing from the installed package", () => {
  test("without miniflare installed, startEdge says which optional peer dependency to install", async () => {
    // A project of its own, with the package and no peers.
    const bare = path.join(scratch, "bare");
    mkdirSync(path.join(bare, "node_modules"), { recursive: true });
    cpSync(path.join(app, "node_modules", "sluicegate"), path.join(bare, "node_modules", "sluicegate"), { recursive: true });
    const out = await run(process.execPath, ["--input-type=module", "-e", 'import { startEdge } from "sluicegate/testing"; await startEdge();'], {
      cwd: bare,
    });
    assert.notEqual(out.code, 0);
    assert.match(
      out.stderr,
      /sluicegate\/testing: startEdge \(the edge in workerd\) needs miniflare, an optional peer dependency that is not installed: npm install --save-dev miniflare/,
    );
    assert.match(out.stderr, /code: 'ERR_SLUICEGATE_TESTING_REQUIREMENT'/);
    // and replay, which starts one, says the same as a usage error, with the way round it
    writeFileSync(path.join(bare, "rules.json"), JSON.stringify({ rules: [] }));
    writeFileSync(path.join(bare, "trace.csv"), "t,ip.src\n0,198.51.100.1\n");
    const cli = path.join(bare, "node_modules", "sluicegate", "js", "cli.mjs");
    const replay = await run(process.execPath, [cli, "replay", "--rules", "rules.json", "--trace", "trace.csv"], { cwd: bare });
    assert.equal(replay.code, 2, replay.stderr);
    assert.match(replay.stderr, /sluicegate replay: error: .*needs miniflare, an optional peer dependency .*; or pass --edge URL for a running edge\n$/);
  });

  test("the guide's sample for testing rules runs as written against a local origin, with the rate-limit headers", { timeout: 90_000 }, async () => {
    const [sample] = readmeSamples(TESTING_PAGE, "docs/testing.md");
    assert.match(sample.code, /from "sluicegate\/testing"/);
    const origin = await listen((req, res) => res.writeHead(200, { "content-type": "text/plain" }).end(`origin saw ${req.url}`));
    try {
      writeFileSync(path.join(app, "readme-testing.mjs"), sample.code.replace(/http:\/\/127\.0\.0\.1:\d+/g, origin.url));
      const out = await run(process.execPath, ["readme-testing.mjs"]);
      assert.equal(out.code, 0, out.stderr);
      assert.match(out.stdout, /^200 /, out.stdout);
    } finally {
      await origin.close();
    }
  });

  test("the development build answers without an origin, and the deploy build refuses to start without one", { timeout: 90_000 }, async () => {
    const script = `import { startEdge } from "sluicegate/testing";
const dev = await startEdge();
const ping = await dev.fetch("/api/ping", { cf: { colo: "AMS" } });
console.log(ping.status, (await ping.json()).colo);
await dev.close();
await startEdge({ build: "deploy" }).catch((error) => console.log(error.message));
`;
    writeFileSync(path.join(app, "builds.mjs"), script);
    const out = await run(process.execPath, ["builds.mjs"]);
    assert.equal(out.code, 0, out.stderr);
    const [first, second] = out.stdout.trimEnd().split("\n");
    assert.equal(first, "200 AMS");
    assert.match(second, /^the edge did not start: Uncaught Error: sluicegate: not starting: .*ORIGIN_URL/);
  });

  test("under Node 20, startEdge names the Node it needs", { skip: SYSTEM_NODE ? false : "no other Node on this machine" }, async () => {
    const out = await run(SYSTEM_NODE.node, ["--input-type=module", "-e", 'import { startEdge } from "sluicegate/testing"; await startEdge();']);
    assert.notEqual(out.code, 0);
    const needs = `startEdge needs Node >= 22\\.12 \\(Miniflare 4 does\\); this is Node ${SYSTEM_NODE.version.slice(1).replaceAll(".", "\\.")}`;
    assert.match(out.stderr, new RegExp(needs));
    // npx sluicegate replay on that Node: a usage error saying so, and the way round it
    const cli = path.join(app, "node_modules", "sluicegate", "js", "cli.mjs");
    writeFileSync(path.join(app, "one-request.csv"), "t,ip.src\n0,198.51.100.1\n");
    const replay = await run(SYSTEM_NODE.node, [cli, "replay", "--rules", path.join(ROOT, "worker/rules.json"), "--trace", "one-request.csv"]);
    assert.equal(replay.code, 2, replay.stderr);
    assert.match(replay.stderr, new RegExp(`sluicegate replay: error: .*${needs}; or pass --edge URL for a running edge`));
  });
});

describe("the command line from npx", () => {
  const npx = (...args) => run("npx", ["--offline", "--no-update-notifier", "sluicegate", ...args]);

  test("sim CONFIG --json prints the reference's output", async () => {
    const out = await npx("sim", path.join(ROOT, "examples/orders-api.json"), "--json");
    assert.equal(out.stdout, readFileSync(path.join(ROOT, "tests/fixtures/sim/golden/orders-api.json"), "utf8"));
    assert.equal(out.code, 1, `high findings: exit status 1 (stderr: ${out.stderr})`);
  });

  test("check-rules summarises a good rules file and names every problem of a bad one", async () => {
    const good = await npx("check-rules", path.join(ROOT, "worker/rules.json"));
    assert.equal(good.code, 0, good.stderr);
    assert.match(good.stdout, /rules\.json: \d+ rule\(s\) valid\n/);
    writeFileSync(path.join(app, "bad-rules.json"), JSON.stringify({ rules: [{ id: "api", match: {}, characteristics: ["ip.src"], period: 0, requests_per_period: -1 }] }));
    const bad = await npx("check-rules", "bad-rules.json");
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /^bad-rules\.json: .*\bperiod\b/m);
    assert.match(bad.stderr, /^bad-rules\.json: .*\brequests_per_period\b/m);
    assert.match(bad.stderr, /bad-rules\.json: 2 problem\(s\); nothing was loaded/);
  });

  test("replay starts the package's own worker (no checkout) and agrees with the simulator", { timeout: 90_000 }, async () => {
    const rules = { rules: [{ id: "api", match: { path: { starts_with: "/api/" } }, characteristics: ["ip.src"], period: 10, requests_per_period: 5, mitigation_timeout: 10 }] };
    writeFileSync(path.join(app, "replay-rules.json"), JSON.stringify(rules));
    // one client, 12 requests 0.5 s apart (of trace time): 5 admitted, then blocked
    const rows = Array.from({ length: 12 }, (_, i) => `${i * 0.5},198.51.100.4,AMS,/api/x`);
    writeFileSync(path.join(app, "trace.csv"), `t,ip.src,cf.colo.id,endpoint\n${rows.join("\n")}\n`);
    const out = await npx("replay", "--rules", "replay-rules.json", "--trace", "trace.csv", "--speed", "10", "--json");
    assert.equal(out.code, 0, `${out.stdout}${out.stderr}`);
    const report = JSON.parse(out.stdout);
    assert.deepEqual([report.requests, report.edge.admitted, report.edge.refused], [12, 5, 7]);
    assert.deepEqual(report.simulator, { admitted: 5, refused: 7 });
    assert.equal(out.stderr, "", "no progress in piped output");
  });
});

/** Whether `script` (util-linux) is here to run a command on a pseudo-terminal. */
const HAS_SCRIPT = (() => {
  try {
    execFileSync("script", ["--version"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
})();

describe("long runs show progress on a terminal, never in piped output", { skip: HAS_SCRIPT ? false : "no `script` to run a command on a terminal" }, () => {
  /**
   * What a terminal shows of the installed `sluicegate …args` (its stdout and stderr, as
   * `script` copies them; the bin itself, as npx draws a spinner of its own on a terminal).
   */
  const onTerminal = (...args) => run("script", ["-qfec", ["node_modules/.bin/sluicegate", ...args].join(" "), "/dev/null"]);

  test("sim: how many requests of how many, blanked before the report; piped, nothing", { timeout: 90_000 }, async () => {
    // orders-api.json over 300,000 s: about 7.5 million requests, a few seconds
    const config = { ...JSON.parse(readFileSync(path.join(ROOT, "examples/orders-api.json"), "utf8")), duration_s: 300_000 };
    writeFileSync(path.join(app, "long.json"), JSON.stringify(config));
    const args = ["sim", "long.json", "--max-requests", "100000000"];
    const out = await onTerminal(...args);
    const shown = out.stdout.replaceAll("\r\n", "\n");
    const drawn = [...shown.matchAll(/\r(sim: [\d,]+ of [\d,]+ requests \(\d+ %\) *)/g)].map((m) => m[1]);
    assert.ok(drawn.length > 0, `a progress line in ${JSON.stringify(shown.slice(0, 300))}`);
    const blank = shown.lastIndexOf("\r");
    assert.match(shown.slice(0, blank + 1), new RegExp(`\r {${drawn.at(-1).length}}\r$`), "the line is blanked");
    const piped = await run("node_modules/.bin/sluicegate", args);
    assert.equal(piped.stderr, "");
    assert.equal(shown.slice(blank + 1), piped.stdout, "the same report");
  });

  test("replay: how many requests were sent, blanked before the report", { timeout: 90_000 }, async () => {
    writeFileSync(
      path.join(app, "slow-rules.json"),
      JSON.stringify({ rules: [{ id: "api", match: {}, characteristics: ["ip.src"], period: 10, requests_per_period: 5, mitigation_timeout: 10 }] }),
    );
    // 20 requests over 2 s at 1×
    const rows = Array.from({ length: 20 }, (_, i) => `${i / 10},198.51.100.5`);
    writeFileSync(path.join(app, "slow.csv"), `t,ip.src\n${rows.join("\n")}\n`);
    const out = await onTerminal("replay", "--rules", "slow-rules.json", "--trace", "slow.csv");
    const shown = out.stdout.replaceAll("\r\n", "\n");
    assert.equal(out.code, 0, shown);
    const drawn = [...shown.matchAll(/\r(replay: \d+ of 20 requests sent \(\d+ %\) *)/g)].map((m) => m[1]);
    assert.ok(drawn.length > 0, `a progress line in ${JSON.stringify(shown)}`);
    const blank = shown.lastIndexOf("\r");
    assert.match(shown.slice(0, blank + 1), new RegExp(`\r {${drawn.at(-1).length}}\r$`), "the line is blanked");
    assert.match(shown.slice(blank + 1), /^replay: 20 requests at 1× speed/);
  });
});

describe("every wrong turn says what to do", () => {
  const nodes = [{ node: process.execPath, version: process.version }, ...(SYSTEM_NODE ? [SYSTEM_NODE] : [])];
  for (const { node, version } of nodes) {
    test(`the Workers-only entries under Node ${version} name what to use instead, however they are imported or required`, async () => {
      const workersOnly =
        /sluicegate\/worker and sluicegate\/hono run in Cloudflare Workers only: .* In Node use sluicegate\/middleware .* startEdge\(\{ main \}\) from sluicegate\/testing/;
      for (const [entry, name] of [
        ["sluicegate/worker", "createEdge"],
        ["sluicegate/hono", "rateLimit"],
      ]) {
        // A static import cannot be caught: the program stops at it with the message (not a
        // SyntaxError about a missing export, which a named import used to get).
        for (const form of [`{ ${name} }`, "* as edge", "edge"]) {
          const statement = `import ${form} from ${JSON.stringify(entry)};`;
          const out = await run(node, ["--input-type=module", "-e", `${statement}\nconsole.log("ran on");`]);
          assert.notEqual(out.code, 0, statement);
          assert.equal(out.stdout, "", statement);
          assert.doesNotMatch(out.stderr, /SyntaxError/, statement);
          assert.match(out.stderr, new RegExp(`^Error: ${workersOnly.source}`, "m"), statement);
        }
        // A dynamic import and require() can be caught, and the program goes on.
        const script = `try { await import(${JSON.stringify(entry)}); } catch (e) { console.log("import:", e.message); }
import { createRequire } from "node:module";
try { createRequire(import.meta.url)(${JSON.stringify(entry)}); } catch (e) { console.log("require:", e.message); }
console.log("went on");`;
        const out = await run(node, ["--input-type=module", "-e", script]);
        assert.equal(out.code, 0, out.stderr);
        const lines = out.stdout.trimEnd().split("\n");
        assert.equal(lines.at(-1), "went on");
        for (const way of ["import:", "require:"]) {
          assert.match(out.stdout, new RegExp(`${way} ${workersOnly.source}`), `${entry}, ${way}`);
        }
      }
    });
  }

  test("sluicegate/testing bundled for a page or a Worker says it runs under Node only, and sluicegate/worker bundled for Node that it runs in Workers only", async () => {
    const { build } = await import("esbuild");
    writeFileSync(path.join(app, "in-page.mjs"), 'import { startEdge } from "sluicegate/testing";\nconsole.log(typeof startEdge);\n');
    for (const [where, options] of [
      ["page", { platform: "browser" }],
      ["Worker", { platform: "neutral", conditions: ["workerd", "worker", "browser"] }],
    ]) {
      const outfile = path.join(app, "dist", `in-${where}.mjs`);
      await build({ entryPoints: [path.join(app, "in-page.mjs")], bundle: true, format: "esm", outfile, logLevel: "silent", ...options });
      const out = await run(process.execPath, [outfile]);
      assert.notEqual(out.code, 0, where);
      assert.match(out.stderr, /sluicegate\/testing runs under Node \(>= 22\.12\) only: .* not in a page or a Worker/, where);
    }
    // and the other way round: the Workers-only entries bundled for Node keep their throw
    writeFileSync(path.join(app, "node-server.mjs"), 'import { createEdge } from "sluicegate/worker";\nconsole.log(typeof createEdge);\n');
    const outfile = path.join(app, "dist", "node-server.mjs");
    await build({ entryPoints: [path.join(app, "node-server.mjs")], bundle: true, format: "esm", platform: "node", outfile, logLevel: "silent" });
    const out = await run(process.execPath, [outfile]);
    assert.notEqual(out.code, 0);
    assert.match(out.stderr, /sluicegate\/worker and sluicegate\/hono run in Cloudflare Workers only/);
  });

  test("a Node server bundled with the package inside (esbuild --platform=node --bundle) fails at start naming --packages=external", async () => {
    const { build } = await import("esbuild");
    writeFileSync(
      path.join(app, "server.mjs"),
      'import { Limiter } from "sluicegate/limit";\nconsole.log(new Limiter({ algorithm: "fixed_window", limit: 1, windowMs: 1000 }).limit("k").success);\n',
    );
    await build({ entryPoints: [path.join(app, "server.mjs")], bundle: true, platform: "node", format: "esm", outfile: path.join(app, "dist/server.mjs"), logLevel: "silent" });
    for (const { node } of nodes) {
      const out = await run(node, [path.join(app, "dist/server.mjs")]);
      assert.notEqual(out.code, 0, "the bundle cannot find the .wasm");
      assert.match(out.stderr, /sluicegate\/limit cannot read its \.wasm at \S+sluicegate_bg\.wasm \(ENOENT\)/);
      assert.match(out.stderr, /esbuild `--packages=external`/);
    }
    // and as the message says, with --packages=external it runs
    await build({
      entryPoints: [path.join(app, "server.mjs")],
      bundle: true,
      platform: "node",
      format: "esm",
      packages: "external",
      outfile: path.join(app, "dist/ok.mjs"),
      logLevel: "silent",
    });
    const ok = await run(process.execPath, [path.join(app, "dist/ok.mjs")]);
    assert.deepEqual([ok.code, ok.stdout], [0, "true\n"]);
  });
});
