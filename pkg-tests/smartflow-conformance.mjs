#!/usr/bin/env node
// Smart Flow conformance runner: `node pkg-tests/smartflow-conformance.mjs FILE...` runs
// every case of vector files in the official schema (smartflow-vectors.json, version 1)
// against the built package's pure core (sluicegate/smartflow: SmartFlowCore,
// SmartFlowBucket and the free functions), with time injected as each case says.
//
// Prints one line per case, `PASS section/name` or `FAIL section/name: expected …, got …`
// (the file's name first when several files are given), then `N passed, M failed`. Exit
// status 0 only when every case passes (and there was at least one). A section, or a field
// of a case, this runner does not know is a failure, so new vectors cannot pass unnoticed.
// Floats are compared with a tolerance of 1e-9.
import { readFileSync } from "node:fs";
import { basename } from "node:path";
import { SmartFlowBucket, SmartFlowCore, formatSavedAt, isCacheFresh, isUnresolvedScopedUrl, parseSavedAt, urlIdentifiers } from "sluicegate/smartflow";

const TOLERANCE = 1e-9;
const SUPPORTED_VERSION = 1;
const FILE_METADATA = new Set(["$comment", "version"]);
const SECTION_METADATA = new Set(["$comment", "cases"]);
const CASE_METADATA = new Set(["name", "notes"]);

/** A malformed vector: reported as the case's failure. */
class VectorError extends Error {}

/** One case's checks: the first mismatch is the case's failure. */
class Checks {
  failure = null;
  number(what, expected, got) {
    if (this.failure === null && !(Math.abs(expected - got) <= TOLERANCE)) {
      this.failure = `expected ${what} ${show(expected)}, got ${show(got)}`;
    }
  }
  equal(what, expected, got) {
    if (this.failure === null && canonical(expected) !== canonical(got)) {
      this.failure = `expected ${what} ${show(expected)}, got ${show(got)}`;
    }
  }
}

const show = (v) => (v === undefined ? "undefined" : JSON.stringify(v));
/** JSON with object keys sorted, so mappings compare regardless of order. */
function canonical(v) {
  if (v === undefined) return "undefined";
  if (v === null || typeof v !== "object") return JSON.stringify(v);
  if (Array.isArray(v)) return `[${v.map(canonical).join(",")}]`;
  return `{${Object.keys(v)
    .sort()
    .map((k) => `${JSON.stringify(k)}:${canonical(v[k])}`)
    .join(",")}}`;
}

function num(obj, key) {
  const v = obj[key];
  if (typeof v !== "number") throw new VectorError(`field \`${key}\` is not a number`);
  return v;
}
function optNum(obj, key) {
  const v = obj[key];
  if (v === undefined || v === null) return null;
  if (typeof v !== "number") throw new VectorError(`field \`${key}\` is not a number or null`);
  return v;
}
function text(obj, key) {
  const v = obj[key];
  if (typeof v !== "string") throw new VectorError(`field \`${key}\` is not a string`);
  return v;
}
function bool(obj, key) {
  const v = obj[key];
  if (typeof v !== "boolean") throw new VectorError(`field \`${key}\` is not a boolean`);
  return v;
}
function count(obj, key) {
  const v = obj[key];
  if (!Number.isInteger(v) || v < 0) throw new VectorError(`field \`${key}\` is not a count`);
  return v;
}
function stringMap(obj, key, required = false) {
  const v = obj[key];
  if (v === undefined && !required) return {};
  if (v === null || typeof v !== "object" || Array.isArray(v)) throw new VectorError(`field \`${key}\` is not a mapping`);
  for (const [k, org] of Object.entries(v)) {
    if (typeof org !== "string") throw new VectorError(`field \`${key}\`: the value of ${JSON.stringify(k)} is not a string`);
  }
  return v;
}

/** Run `fn(core)` and free the core whatever happens. */
function withCore(options, fn) {
  const core = new SmartFlowCore(options);
  try {
    return fn(core);
  } finally {
    core.free();
  }
}

// Each section: the section-level fields it reads, the case fields it reads, and the runner.
const SECTIONS = {
  token_bucket: {
    sectionKeys: [],
    caseKeys: ["rate", "capacity", "init_tokens", "init_last", "steps"],
    run(_, c, check) {
      const bucket = new SmartFlowBucket(num(c, "rate"), num(c, "capacity"), num(c, "init_tokens"), num(c, "init_last"));
      try {
        if (!Array.isArray(c.steps)) throw new VectorError("`steps` is not a list");
        c.steps.forEach((step, i) => {
          for (const key of Object.keys(step)) {
            if (!["now", "tokens_after", "wait"].includes(key)) throw new VectorError(`step ${i}: field \`${key}\` is not handled`);
          }
          const wait = bucket.acquire(num(step, "now"));
          check.number(`step ${i} wait`, num(step, "wait"), wait);
          check.number(`step ${i} tokens_after`, num(step, "tokens_after"), bucket.tokens);
        });
      } finally {
        bucket.free();
      }
    },
  },

  rate_setter_floor: {
    sectionKeys: [],
    caseKeys: ["set_rate", "expected_rate"],
    run(_, c, check) {
      const bucket = new SmartFlowBucket(10, 10);
      try {
        const applied = bucket.setRate(num(c, "set_rate"));
        check.number("returned rate", num(c, "expected_rate"), applied);
        check.number("rate", num(c, "expected_rate"), bucket.rate);
      } finally {
        bucket.free();
      }
    },
  },

  resolve_org: {
    sectionKeys: ["network_to_org", "serial_to_org"],
    caseKeys: ["url", "expected_org"],
    run(section, c, check) {
      if (!("expected_org" in c)) throw new VectorError("no `expected_org`");
      const expected = c.expected_org;
      if (expected !== null && typeof expected !== "string") throw new VectorError("`expected_org` is not a string or null");
      withCore(null, (core) => {
        for (const [net, org] of Object.entries(stringMap(section, "network_to_org"))) core.registerNetwork(net, org);
        for (const [serial, org] of Object.entries(stringMap(section, "serial_to_org"))) core.registerDevice(serial, org);
        check.equal("org", expected, core.resolveOrg(text(c, "url")) ?? null);
      });
    },
  },

  is_unresolved_scoped_url: {
    sectionKeys: [],
    caseKeys: ["url", "expected"],
    run(_, c, check) {
      check.equal("is_unresolved_scoped_url", bool(c, "expected"), isUnresolvedScopedUrl(text(c, "url")));
    },
  },

  aimd: {
    sectionKeys: [],
    caseKeys: ["op", "target", "start_rate", "expected_rate", "configured_rate", "url", "org_resolvable"],
    run(_, c, check) {
      const ORG = "O_1";
      const target = text(c, "target");
      if (target !== "org" && target !== "global") throw new VectorError(`unknown target \`${target}\``);
      const configured = optNum(c, "configured_rate");
      const options = {};
      if (configured !== null) options[target === "org" ? "orgRate" : "globalRate"] = configured;
      const url = c.url === undefined ? (target === "org" ? "/organizations/O_1/networks" : "/administered/identities/me") : text(c, "url");
      const resolvable = c.org_resolvable === undefined ? target === "org" : bool(c, "org_resolvable");
      withCore(options, (core) => {
        if (resolvable) {
          core.registerOrg(ORG);
          const ids = urlIdentifiers(url);
          if (ids.organization === null) {
            if (ids.network !== null) core.registerNetwork(ids.network, ORG);
            else if (ids.device !== null) core.registerDevice(ids.device, ORG);
          }
        }
        const start = num(c, "start_rate");
        const globalBefore = core.globalRate;
        const set = target === "org" ? core.setOrgRate(ORG, start) : core.setGlobalRate(start);
        if (set !== start) throw new VectorError(`start_rate ${start} cannot be set (the floor gives ${set})`);
        const op = text(c, "op");
        if (op === "on_rate_limited") {
          const penalty = core.onRateLimited(url);
          const expected = target === "org" ? "org" : isUnresolvedScopedUrl(url) && !resolvable ? "skipped" : "global";
          check.equal("penalty", expected, penalty);
        } else if (op === "on_success") {
          core.onSuccess(url);
        } else {
          throw new VectorError(`unknown op \`${op}\``);
        }
        if (target === "org") {
          check.number("global rate (untouched)", globalBefore, core.globalRate);
          check.number("rate", num(c, "expected_rate"), core.orgRate(ORG));
        } else {
          check.number("rate", num(c, "expected_rate"), core.globalRate);
        }
      });
    },
  },

  learn_from_response: {
    sectionKeys: [],
    caseKeys: [
      "url",
      "body",
      "expected_network_to_org",
      "expected_serial_to_org",
      "changed_networks",
      "changed_devices",
      "preexisting_network_to_org",
      "preexisting_serial_to_org",
    ],
    run(_, c, check) {
      if (!("body" in c)) throw new VectorError("no `body`");
      const networks = count(c, "changed_networks");
      const devices = count(c, "changed_devices");
      const expectedNetworks = stringMap(c, "expected_network_to_org", true);
      const expectedDevices = stringMap(c, "expected_serial_to_org", true);
      // The body as a parsed object (what SmartFlow.learnFromResponse gets) and as JSON text.
      for (const [how, body] of [
        ["", c.body],
        ["(as text) ", JSON.stringify(c.body)],
      ]) {
        withCore(null, (core) => {
          for (const [net, org] of Object.entries(stringMap(c, "preexisting_network_to_org"))) core.registerNetwork(net, org);
          for (const [serial, org] of Object.entries(stringMap(c, "preexisting_serial_to_org"))) core.registerDevice(serial, org);
          const learned = core.learnFromResponse(text(c, "url"), body);
          check.equal(`${how}changed_networks`, networks, learned.networks);
          check.equal(`${how}changed_devices`, devices, learned.devices);
          check.equal(`${how}dirty`, networks + devices, core.dirty);
          check.equal(`${how}network_to_org`, expectedNetworks, core.networkMappings());
          check.equal(`${how}serial_to_org`, expectedDevices, core.deviceMappings());
        });
      }
    },
  },

  cache_freshness: {
    sectionKeys: [],
    caseKeys: ["now", "saved_ts", "ttl", "expected_fresh"],
    run(_, c, check) {
      const now = num(c, "now");
      const saved = optNum(c, "saved_ts");
      const ttl = optNum(c, "ttl");
      const expected = bool(c, "expected_fresh");
      check.equal("fresh", expected, isCacheFresh(now, saved, ttl));
      // The same decision through a whole cache file, as loading makes it.
      const file = { networks: [{ id: "N_1", organization: { id: "O_1" } }] };
      if (saved !== null) file.saved_at = formatSavedAt(saved);
      withCore({ cacheTtlSeconds: ttl }, (core) => {
        const outcome = core.loadCache(JSON.stringify(file), now);
        check.equal("load", expected ? { state: "loaded", networks: 1, devices: 0 } : { state: "expired" }, outcome);
        check.equal("cache_fresh", expected, core.cacheFresh);
        check.equal("mapping loaded", expected ? "O_1" : null, core.resolveOrg("/networks/N_1") ?? null);
      });
    },
  },

  saved_at_format: {
    sectionKeys: [],
    caseKeys: ["value", "expected_epoch"],
    run(_, c, check) {
      if (!("value" in c)) throw new VectorError("no `value`");
      const expected = optNum(c, "expected_epoch");
      const got = parseSavedAt(c.value) ?? null;
      if (expected !== null && got !== null) check.number("epoch", expected, got);
      else check.equal("epoch", expected, got);
      // A timestamp that parses is written back exactly as it was read.
      if (expected !== null) check.equal("formatSavedAt", c.value, formatSavedAt(expected));
    },
  },
};

function runFile(path, prefix, report) {
  let file;
  try {
    file = JSON.parse(readFileSync(path, "utf8"));
  } catch (error) {
    report(`${prefix}(file)`, `cannot read ${path}: ${error.message}`);
    return;
  }
  if (file === null || typeof file !== "object" || Array.isArray(file)) {
    report(`${prefix}(file)`, "expected a JSON object of sections, got something else");
    return;
  }
  if (file.version !== SUPPORTED_VERSION) {
    report(`${prefix}(file)`, `expected version ${SUPPORTED_VERSION}, got ${show(file.version)}`);
    return;
  }
  for (const [sectionName, section] of Object.entries(file)) {
    if (FILE_METADATA.has(sectionName)) continue;
    const spec = Object.hasOwn(SECTIONS, sectionName) ? SECTIONS[sectionName] : null;
    const where = `${prefix}${sectionName}`;
    if (spec === null) {
      report(where, `expected a known section, got \`${sectionName}\` (not handled by this runner)`);
      continue;
    }
    if (section === null || typeof section !== "object" || !Array.isArray(section.cases) || section.cases.length === 0) {
      report(where, "expected a section with a non-empty `cases` list");
      continue;
    }
    const unknownSectionKeys = Object.keys(section).filter((k) => !SECTION_METADATA.has(k) && !spec.sectionKeys.includes(k));
    section.cases.forEach((c, i) => {
      const name = `${where}/${typeof c?.name === "string" ? c.name : `#${i}`}`;
      if (c === null || typeof c !== "object" || Array.isArray(c)) {
        report(name, "expected a case object");
        return;
      }
      const unknown = [
        ...unknownSectionKeys.map((k) => `section field \`${k}\``),
        ...Object.keys(c)
          .filter((k) => !CASE_METADATA.has(k) && !spec.caseKeys.includes(k))
          .map((k) => `field \`${k}\``),
      ];
      if (unknown.length > 0) {
        report(name, `expected only known fields, got ${unknown.join(", ")} (not handled by this runner)`);
        return;
      }
      const check = new Checks();
      try {
        spec.run(section, c, check);
      } catch (error) {
        report(name, error instanceof VectorError ? `a well-formed case, got ${error.message}` : `no error, got ${error?.message ?? error}`);
        return;
      }
      report(name, check.failure);
    });
  }
}

const files = process.argv.slice(2);
if (files.length === 0) {
  console.error("usage: node pkg-tests/smartflow-conformance.mjs FILE...");
  process.exit(2);
}
let passed = 0;
let failed = 0;
const report = (name, failure) => {
  if (failure === null) {
    passed++;
    console.log(`PASS ${name}`);
  } else {
    failed++;
    console.log(`FAIL ${name}: ${failure}`);
  }
};
for (const path of files) runFile(path, files.length > 1 ? `${basename(path)}: ` : "", report);
console.log(`${passed} passed, ${failed} failed`);
process.exitCode = failed === 0 && passed > 0 ? 0 : 1;
