// sluicegate/sim (the policy simulator). Node: read the .wasm beside the web build and instantiate it synchronously, so the
// exports work straight after import (a later `await init()` is a no-op).
import { readFileSync } from "node:fs";
import { initSync } from "../pkg-sim/sluicegate.js";

initSync({ module: readFileSync(new URL("../pkg-sim/sluicegate_bg.wasm", import.meta.url)) });

export * from "../pkg-sim/sluicegate.js";
export { default } from "../pkg-sim/sluicegate.js";
export { SimulationError, checkConfig, compareSimulations, edgeRulesPath, inlineEdgeRules, runSimulation, selfTest, simulate } from "./sim.js";
