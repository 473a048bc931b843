// sluicegate/sim (the policy simulator). Browsers and bundlers: the web build as is; `await init()` loads the .wasm (the bundler
// copies it as an asset). Vite 7 and older: optimizeDeps: { exclude: ["sluicegate"] }; esbuild: pass the URL of the .wasm imported from "…/wasm" (README, Bundlers).
import wasmInit from "../pkg-sim/sluicegate.js";
import { guardInit } from "./init.js";

export * from "../pkg-sim/sluicegate.js";
export default guardInit(wasmInit, "sluicegate/sim");
export { SimulationError, checkConfig, compareSimulations, edgeRulesPath, inlineEdgeRules, runSimulation, selfTest, simulate } from "./sim.js";
