// The policy simulator from the built package (sluicegate/sim, Node entry) and its command
// line (js/cli.mjs): the reference simulator's recorded outputs (tests/fixtures/sim/golden)
// byte for byte, errors naming the field, the timeline, a real Worker, and every parity
// case of tests/fixtures/sim/cases.txt through `sluicegate sim` on Node.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { fileURLToPath } from "node:url";
import { packageWorker } from "./support/workerd.mjs";
import { SimulationError, checkConfig, compareSimulations, runSimulation, selfTest, simulate } from "sluicegate/sim";

const root = fileURLToPath(new URL("..", import.meta.url));
const fixtures = join(root, "tests/fixtures/sim");
const cli = join(root, "js/cli.mjs");
const scratch = mkdtempSync(join(tmpdir(), "sluicegate-sim-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

const read = (path) => readFileSync(path, "utf8");
const example = (name) => read(join(root, "examples", `${name}.json`));
const golden = (name, ext) => read(join(fixtures, "golden", `${name}.${ext}`));

/** Run `node js/cli.mjs ARGS` in `cwd`; resolves { code, stdout, stderr } whatever the exit status. */
function sluicegate(args, { cwd = root } = {}) {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [cli, ...args], { cwd, encoding: "utf8", maxBuffer: 16 << 20 }, (error, stdout, stderr) => {
      if (error && typeof error.code !== "number") reject(error);
      else resolve({ code: error ? error.code : 0, stdout, stderr });
    });
  });
}

/** Throws a SimulationError with this exit status whose message matches every pattern. */
function assertSimulationError(run, exitCode, ...patterns) {
  assert.throws(run, (e) => {
    assert.ok(e instanceof SimulationError, `a SimulationError, got ${e}`);
    assert.equal(e.name, "SimulationError");
    assert.equal(e.exitCode, exitCode, e.message);
    for (const p of patterns) assert.match(e.message, p);
    return true;
  });
}

const small = (overrides = {}) => ({
  duration_s: 20,
  policies: [{ name: "per-client", algorithm: "token_bucket", rate: 1, burst: 2 }],
  clients: [{ name: "app", kind: "legit", rps: 2 }],
  ...overrides,
});

for (const [name, exitCode] of [
  ["orders-api", 1],
  ["orders-api-tuned", 0],
]) {
  test(`${name}: the reference's report, Markdown and exit status exactly`, () => {
    const config = example(name);
    assert.equal(config, read(join(fixtures, "configs", `${name}.json`)), "examples/ holds the reference's example");
    assert.deepEqual(simulate(config), JSON.parse(golden(name, "json")));
    assert.deepEqual(simulate(JSON.parse(config)), JSON.parse(golden(name, "json")), "the config as an object");
    const run = runSimulation(config);
    assert.equal(run.markdown, golden(name, "md"));
    assert.equal(run.reportJson, golden(name, "json"), "the --json document byte for byte");
    assert.deepEqual(run.report, JSON.parse(golden(name, "json")));
    assert.equal(run.markdownError, null);
    assert.equal(run.exitCode, exitCode);
    assert.equal(String(exitCode), golden(name, "exit").trim());
  });
}

test("a recorded trace instead of the generated clients (cases.txt: trace-basic)", () => {
  assert.match(read(join(fixtures, "cases.txt")), /^trace-basic \| md json \| configs\/trace-config\.json --trace traces\/basic\.csv \|$/m);
  const config = read(join(fixtures, "configs/trace-config.json"));
  const trace = read(join(fixtures, "traces/basic.csv"));
  const run = runSimulation(config, trace);
  assert.equal(run.markdown, golden("trace-basic", "md"));
  assert.equal(run.reportJson, golden("trace-basic", "json"));
  assert.equal(run.exitCode, Number(golden("trace-basic", "exit")));
  assert.deepEqual(simulate(config, trace), JSON.parse(golden("trace-basic", "json")));
});

test("a bad trace row is named by the trace's name and line", () => {
  const config = read(join(fixtures, "configs/trace-config.json"));
  const trace = read(join(fixtures, "traces/bad-row.csv"));
  assertSimulationError(() => simulate(config, trace), 2, /^trace line 4/);
  assertSimulationError(() => simulate(config, trace, { traceName: "traces/bad-row.csv" }), 2, /^traces\/bad-row\.csv line 4/);
});

test("an unknown algorithm: SimulationError, exit status 2, naming the policy", () => {
  const config = small({ policies: [{ name: "leaky-one", algorithm: "leaky" }] });
  assertSimulationError(() => simulate(config), 2, /policy 'leaky-one'/, /algorithm must be one of/, /token_bucket/);
  assertSimulationError(() => runSimulation(JSON.stringify(config)), 2, /policy 'leaky-one'/);
  assertSimulationError(() => checkConfig(config), 2, /policy 'leaky-one'/);
});

test("a client with a negative rps: the message names the client and the field", () => {
  const config = small({ clients: [{ name: "neg", kind: "legit", rps: -2 }] });
  assertSimulationError(() => simulate(config), 2, /^neg\.rps must be > 0, got -2$/);
  assertSimulationError(() => checkConfig(config), 2, /neg\.rps/);
});

test("a config too big to finish is refused before it runs, naming the client and the estimate; maxRequests moves the ceiling", () => {
  const started = Date.now();
  for (const [config, pattern] of [
    [
      small({ duration_s: 1e12, clients: [{ name: "mobile", rps: 1000 }] }),
      /^client "mobile": about 1\.0e15 requests over 1e\+12 s; the most a run may make is 50,000,000 \(raise it with the maxRequests option\)$/,
    ],
    [
      small({
        clients: [
          { name: "app", rps: 1 },
          { name: "flood", rps: 1e9 },
        ],
      }),
      /^client "flood": about 2\.0e10 requests over 20 s/,
    ],
    [small({ clients: [{ name: "batch", pattern: "burst", burst: 1e9, every_s: 1e-6 }] }), /^client "batch": about 2\.0e16 requests/],
  ]) {
    assertSimulationError(() => simulate(config), 2, pattern);
    assertSimulationError(() => runSimulation(config), 2, pattern);
  }
  assert.ok(Date.now() - started < 1000, "refused at once");
  // 40 + 40 requests: under a ceiling of 80, over one of 79
  const two = small({
    clients: [
      { name: "a", kind: "legit", rps: 2 },
      { name: "b", kind: "legit", rps: 2 },
    ],
  });
  assertSimulationError(() => simulate(two, null, { maxRequests: 79 }), 2, /^the 2 clients together: about 80 requests/);
  for (const maxRequests of [80, 1e6, Infinity, undefined, null]) {
    assert.equal(simulate(two, null, { maxRequests }).clients.length, 2, `${maxRequests}`);
  }
  // a trace is not estimated
  assert.equal(simulate(two, "t,client\n0,a\n1,b\n", { maxRequests: 1 }).clients.length, 2);
  for (const bad of [0, -1, 1.5, Number.NaN, "100"]) {
    assert.throws(() => simulate(two, null, { maxRequests: bad }), { name: "TypeError", message: /options\.maxRequests/ });
  }
});

test("bad JSON, a config that is not an object, and arguments of the wrong type", () => {
  assertSimulationError(() => simulate('{"duration_s": 10, }'), 2, /line 1 column/);
  assertSimulationError(() => simulate([1, 2]), 2, /JSON object/);
  assert.throws(() => simulate(42), { name: "TypeError", message: /config must be an object or JSON text, got number/ });
  assert.throws(() => simulate(small(), 5), { name: "TypeError", message: /trace must be CSV text/ });
  assert.throws(() => simulate(small(), null, { traceName: "" }), { name: "TypeError", message: /traceName/ });
  const cyclic = small();
  cyclic.self = cyclic;
  assert.throws(() => simulate(cyclic), { name: "TypeError", message: /cannot be written as JSON/ });
  assertSimulationError(() => simulate(small({ edge_rules: "rules.json" })), 2, /edge_rules: 'rules\.json' is a path/);
  assert.doesNotThrow(() => checkConfig(small()));
});

test("a Markdown report the reference crashes on: the JSON report still comes, the Markdown's error with status 1", () => {
  const config = read(join(fixtures, "configs/reference-crash-quota.json"));
  const run = runSimulation(config);
  assert.equal(run.markdown, null);
  assert.ok(run.markdownError instanceof SimulationError);
  assert.equal(run.markdownError.exitCode, 1);
  assert.match(run.markdownError.message, /'lots'/);
  assert.equal(run.reportJson, golden("reference-crash-quota", "json"));
  assert.deepEqual(simulate(config), JSON.parse(golden("reference-crash-quota", "json")));
  assertSimulationError(() => simulate(read(join(fixtures, "configs/reference-crash-rl06.json"))), 1, /max\(\) arg is an empty sequence/);
});

test("non-finite numbers in the report (Python's json.dumps writes Infinity) come back as numbers", () => {
  const config =
    '{"duration_s": 5, "capacity_rps": 1e308, "policies": [{"name": "p", "algorithm": "fixed_window", "limit": 1e308, "window_s": 1e-10}],' +
    ' "clients": [{"name": "app", "kind": "legit", "rps": 2}]}';
  const run = runSimulation(config);
  assert.match(run.reportJson, /"sustained_rps": Infinity,/);
  const [policy] = run.report.policies;
  assert.equal(policy.sustained_rps, Infinity);
  assert.equal(policy.worst_case_per_window, Infinity);
  assert.equal(policy.window_s, 1e-10);
  assert.ok(
    run.report.findings.some((f) => f.message.includes("x inf req/s per client = inf req/s")),
    "strings are left alone",
  );
  assert.equal(run.timeline.capacity_rps, 1e308);
  assert.deepEqual(simulate(config), run.report);
});

test("the timeline counts every attempt once: its totals are the report's", () => {
  for (const config of [example("orders-api"), example("orders-api-tuned"), JSON.stringify(small())]) {
    const { report, timeline } = runSimulation(config);
    const sum = (rows) => rows.flat().reduce((a, b) => a + b, 0);
    assert.equal(sum(timeline.clients.map((c) => c.admitted)), report.admitted);
    assert.equal(
      sum(timeline.clients.map((c) => c.rejected)),
      report.clients.reduce((a, c) => a + c.rejected, 0),
    );
    for (const c of timeline.clients) {
      assert.equal(c.admitted.length, timeline.seconds);
      assert.equal(c.rejected.length, timeline.seconds);
      const row = report.clients.find((r) => r.client === c.name);
      assert.equal(sum([c.admitted]), row.allowed, `${c.name} admitted`);
      assert.equal(sum([c.rejected]), row.rejected, `${c.name} rejected`);
    }
    assert.deepEqual(new Set(timeline.clients.map((c) => c.name)), new Set(report.clients.map((c) => c.client)));
    assert.equal(timeline.capacity_rps, report.capacity_rps);
    const perSecond = Array.from({ length: timeline.seconds }, (_, s) => timeline.clients.reduce((a, c) => a + c.admitted[s], 0));
    assert.equal(Math.max(...perSecond), report.peak_admitted_rps);
    assert.equal(timeline.first_second + perSecond.indexOf(report.peak_admitted_rps), report.peak_second);
  }
});

test("selfTest() is the reference's self-test", () => {
  const { output, ok } = selfTest();
  assert.equal(ok, true);
  assert.equal(output, golden("self-test", "md"));
});

test("the command line prints the reference's Markdown report and exits 1 on high findings", async () => {
  const md = await sluicegate(["sim", "examples/orders-api.json"]);
  assert.equal(md.stdout, golden("orders-api", "md"));
  assert.equal(md.stderr, "");
  assert.equal(md.code, 1);
  const json = await sluicegate(["sim", "examples/orders-api.json", "--json"]);
  assert.equal(json.stdout, golden("orders-api", "json"));
  assert.equal(json.code, 1);
  const tuned = await sluicegate(["sim", "--json", "examples/orders-api-tuned.json"]);
  assert.equal(tuned.stdout, golden("orders-api-tuned", "json"));
  assert.equal(tuned.code, 0);
  const self = await sluicegate(["sim", "--self-test"]);
  assert.equal(self.code, 0);
  assert.equal(self.stdout, golden("self-test", "md"));
});

test("the command line: bad input exits 2 with error: on stderr; usage errors as argparse words them", async () => {
  const bad = join(scratch, "bad.json");
  writeFileSync(bad, JSON.stringify(small({ clients: [{ name: "neg", rps: -2 }] })));
  const out = await sluicegate(["sim", bad]);
  assert.equal(out.code, 2);
  assert.equal(out.stdout, "");
  assert.equal(out.stderr, "error: neg.rps must be > 0, got -2\n");
  const missing = await sluicegate(["sim", "no-such.json"]);
  assert.equal(missing.code, 2);
  assert.equal(missing.stderr, "error: no-such.json: cannot read: No such file or directory (os error 2)\n");
  const unknown = await sluicegate(["sim", "examples/orders-api.json", "--verbose"]);
  assert.equal(unknown.code, 2);
  assert.equal(
    unknown.stderr,
    "usage: sluicegate sim [-h] [--trace TRACE] [--reorder-window SECONDS] [--json] [--self-test] [config]\n" +
      "       sluicegate sim BEFORE --compare AFTER [--trace TRACE] [--review [--review-template PATH] | --json]\n" +
      "sluicegate sim: error: unrecognized arguments: --verbose\n",
  );
  const help = await sluicegate(["sim", "-h"]);
  assert.equal(help.code, 0);
  assert.match(help.stdout, /^usage: sluicegate sim \[-h\]/);
  const none = await sluicegate([]);
  assert.equal(none.code, 2);
  assert.match(none.stderr, /^usage: sluicegate check-rules FILE\n/);
});

test("npx sluicegate check-rules prints what the native command line prints, with its exit status, for valid, invalid and unreadable files", async () => {
  const native = join(root, "target/debug/sluicegate");
  assert.ok(existsSync(native), `${native} missing: npm run build builds it`);
  const run = (args) =>
    new Promise((resolve) => {
      execFile(native, args, { cwd: root, encoding: "utf8" }, (error, stdout, stderr) => resolve({ code: error ? error.code : 0, stdout, stderr }));
    });
  writeFileSync(join(scratch, "latin1.json"), Buffer.from([0x7b, 0xe9, 0x7d]));
  const files = [
    "worker/rules.json",
    ...readdirSync(join(root, "worker/examples"))
      .filter((f) => f.endsWith(".json"))
      .map((f) => `worker/examples/${f}`),
    ...readdirSync(join(root, "tests/fixtures/rules")).map((f) => `tests/fixtures/rules/${f}`),
    "no/such/rules.json",
    "worker",
    join(scratch, "latin1.json"),
  ];
  const codes = new Set();
  for (const file of files) {
    const [ours, theirs] = await Promise.all([sluicegate(["check-rules", file]), run(["check-rules", file])]);
    assert.deepEqual(ours, theirs, file);
    codes.add(ours.code);
  }
  assert.deepEqual([...codes].sort(), [0, 1, 2], "valid, invalid and unreadable files were all tried");
  const valid = await sluicegate(["check-rules", "worker/rules.json"]);
  assert.match(valid.stdout, /^worker\/rules\.json: 1 rule\(s\) valid\n {2}api: 20 per 10 s/);
});

test("the command line reads a path given as edge_rules, relative to the config's directory, as the native one does", async () => {
  const dir = join(scratch, "edge");
  mkdirSync(join(dir, "rules"), { recursive: true });
  const rules = read(join(root, "worker/rules.json"));
  writeFileSync(join(dir, "rules/edge.json"), rules);
  // The config's own spelling is kept around the substituted rules (300.0 is not 300).
  const withPath = example("orders-api").replace('"seed": 7,', '"seed": 7,\n  "edge_rules": "rules/edge.json",');
  writeFileSync(join(dir, "orders.json"), withPath);
  const inline = withPath.replace('"rules/edge.json"', rules.trim());
  const want = runSimulation(inline);

  const out = await sluicegate(["sim", join("edge", "orders.json"), "--json"], { cwd: scratch });
  assert.equal(out.stderr, "");
  assert.equal(out.stdout, want.reportJson, "the same as the rules written inline");
  assert.equal(out.code, want.exitCode);
  assert.ok(
    want.report.policies.some((p) => p.name === "api"),
    "the rules file's rule is simulated beside the configured policies",
  );

  writeFileSync(join(dir, "gone.json"), withPath.replace("rules/edge.json", "rules/gone.json"));
  const gone = await sluicegate(["sim", join("edge", "gone.json")], { cwd: scratch });
  assert.equal(gone.code, 2);
  assert.equal(gone.stdout, "");
  assert.equal(gone.stderr, "error: edge_rules: edge/rules/gone.json: cannot read: No such file or directory (os error 2)\n");

  writeFileSync(join(dir, "rules/broken.json"), '{"rules": [');
  writeFileSync(join(dir, "broken.json"), withPath.replace("rules/edge.json", "rules/broken.json"));
  const broken = await sluicegate(["sim", join("edge", "broken.json")], { cwd: scratch });
  assert.equal(broken.code, 2);
  assert.match(broken.stderr, /^error: edge_rules: edge\/rules\/broken\.json: invalid JSON: EOF while parsing a list at line 1 column 11\n$/);
});

test("examples/edge-api.json: the worker's rules file as a count_then_block policy, a pacer that spares the export job its 429s; the command line the same", async () => {
  const config = example("edge-api");
  assert.equal(JSON.parse(config).edge_rules, "../worker/rules.json");
  // In wasm the path is refused, naming it; the rules themselves are simulated.
  assertSimulationError(() => simulate(config), 2, /^edge_rules: '\.\.\/worker\/rules\.json' is a path; /);
  const rules = read(join(root, "worker/rules.json"));
  const inline = config.replace('"../worker/rules.json"', rules.trim());
  const report = simulate(inline);

  const api = report.policies.find((p) => p.name === "api");
  assert.ok(api, report.policies.map((p) => p.name).join(", "));
  assert.equal(api.algorithm, "count_then_block");
  assert.equal(api.window_s, 10);
  assert.equal(api.mitigation_timeout_s, 10);
  assert.ok(api.blocks > 0, `${api.blocks} blocks`);
  assert.equal(
    api.blocks,
    api.blocked_clients.reduce((n, b) => n + b.blocks, 0),
    "every block is some client's",
  );
  assert.ok(!("blocks" in report.policies.find((p) => p.name === "origin")), "only count_then_block policies have blocks");

  const job = report.clients.find((c) => c.client === "export-job");
  assert.ok(job.paced > 0, `${job.paced} paced`);
  assert.equal(job.rejected, 0);
  assert.equal(job.pacer, "export pacer");
  assert.equal(report.policies.find((p) => p.name === "export pacer").delayed, job.paced);
  for (const c of report.clients) assert.ok("paced" in c && "mean_pace_s" in c && "max_pace_s" in c && "pacer" in c, c.client);
  assert.ok(
    report.findings.some((f) => f.code === "RL12"),
    report.findings.map((f) => f.code).join(" "),
  );

  const out = await sluicegate(["sim", "examples/edge-api.json", "--json"]);
  assert.equal(out.stderr, "");
  assert.equal(out.code, runSimulation(inline).exitCode);
  assert.deepEqual(JSON.parse(out.stdout), report, "npx sluicegate sim reads the path and simulates the same");
});

/** cases.txt: name | modes | arguments | what stderr must mention (see tests/sim_parity.rs). */
function parityCases() {
  return read(join(fixtures, "cases.txt"))
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith("#"))
    .map((line) => {
      const [name, modes, args, needles] = line.split("|").map((c) => c.trim());
      return {
        name,
        modes: modes.split(/\s+/),
        args: args.split(/\s+/).filter(Boolean),
        needles: needles
          .split(";")
          .map((n) => n.trim())
          .filter(Boolean),
      };
    });
}

test("every parity case through `sluicegate sim` on Node: the reference's output, exit status and error", { timeout: 120_000 }, async () => {
  const cases = parityCases();
  assert.ok(cases.length >= 40, `${cases.length} cases`);
  const runs = cases.flatMap((c) => c.modes.map((mode) => ({ ...c, mode })));
  const problems = [];
  let next = 0;
  const worker = async () => {
    while (next < runs.length) {
      const { name, mode, args, needles } = runs[next++];
      const out = await sluicegate(["sim", ...args, ...(mode === "json" ? ["--json"] : [])], { cwd: fixtures });
      const what = `${name} (${mode})`;
      const exit = Number(golden(name, "exit"));
      if (out.code !== exit) problems.push(`${what}: exit status ${out.code}, reference ${exit}: ${out.stderr}`);
      let want = null;
      try {
        want = golden(name, mode);
      } catch {
        // the reference printed nothing in this mode
      }
      if ((want ?? "") !== out.stdout) problems.push(`${what}: output differs from golden/${name}.${mode}`);
      if (want === null) {
        for (const needle of needles) {
          if (!out.stderr.includes(needle)) problems.push(`${what}: stderr should name ${JSON.stringify(needle)}: ${out.stderr}`);
        }
      }
    }
  };
  await Promise.all(Array.from({ length: 4 }, worker));
  assert.deepEqual(problems, []);
});

test("the workerd entry simulates in a real Worker", { timeout: 30_000 }, async () => {
  const config = example("orders-api");
  const script = `
    import { SimulationError, runSimulation, simulate } from "../../js/sim-workerd.js";
    const config = ${JSON.stringify(config)};
    export default {
      async fetch() {
        const run = runSimulation(config);
        let error = null;
        try { simulate({ policies: [{ name: "x", algorithm: "leaky" }] }); } catch (e) { error = { simulation: e instanceof SimulationError, exitCode: e.exitCode, message: e.message }; }
        return Response.json({ json: run.reportJson, markdown: run.markdown, exitCode: run.exitCode, error });
      },
    };`;
  // The path only resolves the script's imports; the module is `script`.
  const mf = packageWorker({ scriptPath: "pkg-tests/fixtures/sim-worker.mjs", script });
  try {
    const res = await mf.dispatchFetch("http://sim.test/");
    assert.equal(res.status, 200);
    const out = await res.json();
    assert.equal(out.json, golden("orders-api", "json"));
    assert.equal(out.markdown, golden("orders-api", "md"));
    assert.equal(out.exitCode, 1);
    assert.equal(out.error.simulation, true);
    assert.equal(out.error.exitCode, 2);
    assert.match(out.error.message, /policy 'x'/);
  } finally {
    await mf.dispose();
  }
});

test("npx sluicegate sim refuses a config too big to finish as the native command line does; --max-requests moves the ceiling", async () => {
  const file = join(scratch, "runaway.json");
  writeFileSync(file, JSON.stringify(small({ duration_s: 1e12, clients: [{ name: "mobile", rps: 1000 }] })));
  const out = await sluicegate(["sim", file]);
  assert.equal(out.code, 2);
  assert.equal(out.stdout, "");
  assert.equal(out.stderr, 'error: client "mobile": about 1.0e15 requests over 1e+12 s; the most a run may make is 50,000,000 (raise it with --max-requests N)\n');
  const under = await sluicegate(["sim", "examples/orders-api.json", "--max-requests", "100", "--json"]);
  assert.equal(under.code, 2);
  assert.match(under.stderr, /the most a run may make is 100 \(raise it with --max-requests N\)/);
  const raised = await sluicegate(["sim", "examples/orders-api.json", "--max-requests=10000", "--json"]);
  assert.equal(raised.stderr, "");
  assert.equal(raised.stdout, golden("orders-api", "json"));
  const bad = await sluicegate(["sim", "examples/orders-api.json", "--max-requests", "lots"]);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /argument --max-requests: expected a whole number, 1 or more, got "lots"/);
});

test("compareSimulations: the seed's example pair on the same traffic, the review the command line prints, the verdict judged on the after run", () => {
  const out = compareSimulations(example("orders-api"), example("orders-api-tuned"), undefined, {
    beforeName: "examples/orders-api.json",
    afterName: "examples/orders-api-tuned.json",
  });
  assert.equal(out.review, golden("compare-orders-api.review", "md"));
  assert.equal(out.markdown, golden("compare-orders-api", "md"));
  assert.equal(out.comparisonJson, golden("compare-orders-api", "json"));
  assert.equal(out.exitCode, 0);
  assert.equal(out.comparison.verdict, "ship with changes");
  const mobile = out.comparison.clients.find((c) => c.client === "mobile-app");
  assert.deepEqual([mobile.before.delayed, mobile.before.requests, mobile.after.delayed], [1042, 1839, 0]);
  assert.deepEqual([out.comparison.peak.before.admitted_rps, out.comparison.peak.after.admitted_rps], [313, 27]);
  // each side is what runSimulation gives for its config alone
  assert.equal(out.before.reportJson, golden("orders-api", "json"));
  assert.equal(out.after.reportJson, golden("orders-api-tuned", "json"));
  assert.equal(out.before.timeline.seconds, runSimulation(example("orders-api")).timeline.seconds);
  // without names, the sides are called before and after
  const plain = compareSimulations(example("orders-api"), example("orders-api-tuned"));
  assert.match(plain.review, /^From the after config:$/m);
});

test("compareSimulations on a trace, and bad pairs refused naming the side", () => {
  const trace = read(join(fixtures, "compare/access.csv"));
  const out = compareSimulations(read(join(fixtures, "compare/before.json")), read(join(fixtures, "compare/after.json")), trace, {
    traceName: "tests/fixtures/sim/compare/access.csv",
    beforeName: "tests/fixtures/sim/compare/before.json",
    afterName: "tests/fixtures/sim/compare/after.json",
  });
  assert.equal(out.review, golden("compare-trace.review", "md"));
  assert.equal(out.exitCode, 1);
  assert.equal(out.comparison.verdict, "do not ship");
  assert.deepEqual(out.comparison.traffic, {
    source: "trace",
    name: "tests/fixtures/sim/compare/access.csv",
    rows: 1431,
    span_s: out.comparison.traffic.span_s,
  });
  const tuned = JSON.parse(example("orders-api-tuned"));
  assertSimulationError(
    () => compareSimulations(example("orders-api"), { ...tuned, duration_s: 200 }),
    2,
    /the before config simulates 300 s and the after config 200 s/,
    /same duration_s \(or compare them on one trace\)/,
  );
  assertSimulationError(() => compareSimulations(example("orders-api"), "t,client\n0,a\n"), 2, /^the after config: invalid JSON/);
  assertSimulationError(
    () => compareSimulations(example("orders-api"), { ...tuned, clients: [{ name: "flood", rps: 1e9 }] }),
    2,
    /^the after config: client "flood": about .* \(raise it with the maxRequests option\)$/,
  );
  assert.throws(() => compareSimulations(example("orders-api"), tuned, undefined, { afterName: 3 }), TypeError);
});

test("npx sluicegate sim --compare: the native command line's review, JSON and refusals", async () => {
  const review = await sluicegate(["sim", "examples/orders-api.json", "--compare", "examples/orders-api-tuned.json", "--review"]);
  assert.equal(review.stdout, golden("compare-orders-api.review", "md"));
  assert.equal(review.code, 0);
  const json = await sluicegate(["sim", "examples/orders-api.json", "--compare=examples/orders-api-tuned.json", "--json"]);
  assert.equal(json.stdout, golden("compare-orders-api", "json"));
  const traced = await sluicegate([
    "sim",
    "tests/fixtures/sim/compare/before.json",
    "--compare",
    "tests/fixtures/sim/compare/after.json",
    "--trace",
    "tests/fixtures/sim/compare/access.csv",
    "--review",
  ]);
  assert.equal(traced.stdout, golden("compare-trace.review", "md"));
  assert.equal(traced.code, 1);
  const durations = await sluicegate(["sim", "examples/orders-api.json", "--compare", "tests/fixtures/sim/configs/no-findings.json"]);
  assert.equal(durations.code, 2);
  assert.equal(
    durations.stderr,
    "error: examples/orders-api.json simulates 300 s and tests/fixtures/sim/configs/no-findings.json 45 s: the same traffic needs the same duration_s (or compare them on one trace)\n",
  );
  const notConfig = await sluicegate(["sim", "examples/orders-api.json", "--compare", "tests/fixtures/sim/compare/access.csv"]);
  assert.equal(notConfig.code, 2);
  assert.match(notConfig.stderr, /^error: tests\/fixtures\/sim\/compare\/access.csv: invalid JSON/);
  const usage = await sluicegate(["sim", "examples/orders-api.json", "--review"]);
  assert.equal(usage.code, 2);
  assert.match(usage.stderr, /argument --review: needs --compare AFTER/);
});

test("npx sluicegate sim reads its arguments with the native command line's parser: --reorder-window too", async () => {
  const args = ["sim", "tests/fixtures/sim/configs/trace-config.json", "--trace", "tests/fixtures/sim/traces/basic.csv", "--json"];
  const plain = await sluicegate(args);
  assert.equal(plain.stderr, "");
  assert.ok(plain.stdout.startsWith("{"), "the JSON report");
  for (const window of ["0", "2.5", "inf"]) {
    const out = await sluicegate([...args, "--reorder-window", window]);
    assert.equal(out.stdout, plain.stdout, `--reorder-window ${window}: the same results`);
  }
  const abbreviated = await sluicegate([...args.slice(0, 4), "--reo=5", "--js"]);
  assert.equal(abbreviated.stdout, plain.stdout, "long options may be abbreviated");
  const negative = await sluicegate([...args, "--reorder-window", "-1"]);
  assert.equal(negative.code, 2);
  assert.match(negative.stderr, /argument --reorder-window: expected seconds, 0 or more \(or inf\), got "-1"/);
  const ambiguous = await sluicegate(["sim", "examples/orders-api.json", "--re"]);
  assert.equal(ambiguous.code, 2);
  assert.match(ambiguous.stderr, /ambiguous option: --re/);
});

test("onProgress hears how far a run has got every 65,536 requests, changes nothing, and what it throws comes out at the end", () => {
  // 2 clients × 50 requests a second × 1,500 s = 150,000 requests: two calls
  const config = small({
    duration_s: 1500,
    clients: [
      { name: "a", rps: 50 },
      { name: "b", rps: 50 },
    ],
  });
  const calls = [];
  const watched = runSimulation(config, undefined, { onProgress: (done, total) => calls.push([done, total]) });
  assert.deepEqual(
    calls.map(([done]) => done),
    [65536, 131072],
  );
  for (const [done, total] of calls) assert.ok(total >= done && total <= 160_000, `total ${total} for ${done}`);
  assert.deepEqual(watched, runSimulation(config), "the same run, watched or not");

  const sides = [];
  compareSimulations(config, { ...config, policies: [{ name: "per-client", algorithm: "token_bucket", rate: 2, burst: 4 }] }, undefined, {
    onProgress: (done, _total, side) => sides.push(`${side} ${done}`),
  });
  assert.deepEqual(sides, ["before 65536", "before 131072", "after 65536", "after 131072"]);

  let count = 0;
  assert.throws(
    () =>
      runSimulation(config, undefined, {
        onProgress: () => {
          count++;
          throw new Error("stop watching");
        },
      }),
    /^Error: stop watching$/,
  );
  assert.equal(count, 1, "not called again after it threw");
  assert.throws(() => runSimulation(config, undefined, { onProgress: 5 }), /options\.onProgress must be a function, got number/);
});

test("a misspelt config field: runSimulation, checkConfig and compareSimulations reject it naming the field, where it is and the name meant", () => {
  const typo = small({ clients: [{ name: "app", kind: "legit", rps: 2, rsp: 20 }] });
  const message = /^clients\[0\]\.rsp: unknown field in client 'app' \(did you mean "rps"\?\); a client has name, notes, kind, pattern, rps, /;
  for (const run of [() => runSimulation(typo), () => runSimulation(JSON.stringify(typo)), () => simulate(typo), () => checkConfig(typo)]) {
    assertSimulationError(run, 2, message);
    assert.throws(run, { field: "clients[0].rsp" });
  }
  const top = small({ durration_s: 20 });
  assertSimulationError(() => runSimulation(top), 2, /^durration_s: unknown field in the config \(did you mean "duration_s"\?\)/);
  assert.throws(() => runSimulation(top), { field: "durration_s" });
  const policy = small({ policies: [{ name: "per-client", algorithm: "token_bucket", rate: 1, bursts: 2 }] });
  assertSimulationError(() => runSimulation(policy), 2, /^policies\[0\]\.bursts: unknown field in policy 'per-client' \(did you mean "burst"\?\)/);
  // a required number left out is said to be required, not "None"
  const missing = small({ policies: [{ name: "ml", algorithm: "fixed_window", window_s: 1 }] });
  assertSimulationError(() => runSimulation(missing), 2, /^policies\[0\]\.limit is required \(ml\.limit: a number > 0\)$/);
  assert.throws(() => runSimulation(missing), { field: "policies[0].limit" });
  // in a comparison, the side is named too
  const tuned = JSON.parse(example("orders-api-tuned"));
  tuned.clients[0].rsp = tuned.clients[0].rps;
  assertSimulationError(
    () => compareSimulations(example("orders-api"), tuned, undefined, { afterName: "tuned.json" }),
    2,
    /^tuned\.json: clients\[0\]\.rsp: unknown field in client 'mobile-app' \(did you mean "rps"\?\)/,
  );
  // free-text notes are allowed everywhere; other errors carry no field
  assert.doesNotThrow(() => checkConfig(small({ notes: "x", clients: [{ name: "app", rps: 2, notes: "y" }] })));
  assert.throws(() => runSimulation(small({ policies: [{ algorithm: "leaky" }] })), { field: null });
});

test("npx sluicegate with an unknown command names it with the nearest command, as the native command line does, exit status 2", async () => {
  const hint = "Run 'sluicegate --help' for the commands and their options.\n";
  for (const [args, said] of [
    [["simulate", "examples/orders-api.json"], "sluicegate: unknown command 'simulate'; did you mean 'sim'?\n"],
    [["check", "worker/rules.json"], "sluicegate: unknown command 'check'; did you mean 'check-rules'?\n"],
    [["replya"], "sluicegate: unknown command 'replya'; did you mean 'replay'?\n"],
    [["frobnicate"], "sluicegate: unknown command 'frobnicate'\n"],
    [["--hepl"], "sluicegate: unknown option '--hepl'; did you mean '--help'?\n"],
  ]) {
    const { code, stdout, stderr } = await sluicegate(args);
    assert.deepEqual({ code, stdout, stderr }, { code: 2, stdout: "", stderr: `${said}${hint}` }, args.join(" "));
  }
  const none = await sluicegate([]);
  assert.equal(none.code, 2);
  assert.match(none.stderr, /^usage: sluicegate check-rules FILE\n/);
});

test("a review template: the file in templates/ is the built-in review; a team's own is filled; an unknown placeholder is refused naming it", async () => {
  const template = read(join(root, "templates/rate-limit-review.md"));
  const pair = [example("orders-api"), example("orders-api-tuned")];
  const names = { beforeName: "examples/orders-api.json", afterName: "examples/orders-api-tuned.json" };
  assert.equal(compareSimulations(...pair, undefined, { ...names, reviewTemplate: template }).review, golden("compare-orders-api.review", "md"));
  const short = compareSimulations(...pair, undefined, { ...names, reviewTemplate: "{{service}}: {{ verdict }}\n{x}\n" });
  assert.equal(short.review, "Orders API (public v2): **ship with changes** - no high finding after the change; 2 medium remain (RL02, RL05)\n{x}\n");
  assertSimulationError(
    () => compareSimulations(...pair, undefined, { reviewTemplate: "# Review\n{{verdit}}\n", reviewTemplateName: "team.md" }),
    2,
    /^team\.md: line 2: unknown placeholder \{\{verdit\}\} \(did you mean \{\{verdict\}\}\?\); a review template may use \{\{service\}\}, /,
  );
  assertSimulationError(() => compareSimulations(...pair, undefined, { reviewTemplate: "{{nope}}" }), 2, /^the review template: line 1: unknown placeholder \{\{nope\}\}/);
  assert.throws(() => compareSimulations(...pair, undefined, { reviewTemplate: 5 }), { name: "TypeError", message: /options\.reviewTemplate/ });
  // npx sluicegate sim --review-template: the native command line's output and refusals
  const args = ["sim", "examples/orders-api.json", "--compare", "examples/orders-api-tuned.json"];
  const fromFile = await sluicegate([...args, "--review-template", "templates/rate-limit-review.md"]);
  assert.deepEqual([fromFile.code, fromFile.stdout], [0, golden("compare-orders-api.review", "md")]);
  const typo = join(scratch, "typo.md");
  writeFileSync(typo, "# Review\n{{verdit}}\n");
  const refused = await sluicegate([...args, `--review-template=${typo}`]);
  assert.equal(refused.code, 2);
  const said = `error: ${typo}: line 2: unknown placeholder {{verdit}} (did you mean {{verdict}}?); a review template may use {{service}}, `;
  assert.ok(refused.stderr.startsWith(said), refused.stderr);
  const unreadable = await sluicegate([...args, "--review-template", "no/such.md"]);
  assert.deepEqual([unreadable.code, unreadable.stderr], [2, "error: no/such.md: cannot read: No such file or directory (os error 2)\n"]);
});
