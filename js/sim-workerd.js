// sluicegate/sim (the policy simulator). Cloudflare Workers: wasm cannot be compiled from bytes at run time there, so import the
// module (wrangler hands over a compiled WebAssembly.Module) and instantiate it.
import wasm from "../pkg-sim/sluicegate_bg.wasm";
import { initSync } from "../pkg-sim/sluicegate.js";

initSync({ module: wasm });

export * from "../pkg-sim/sluicegate.js";
export { default } from "../pkg-sim/sluicegate.js";
export { SimulationError, checkConfig, compareSimulations, edgeRulesPath, inlineEdgeRules, runSimulation, selfTest, simulate } from "./sim.js";
