// sluicegate/sim (the policy simulator). Browsers and bundlers: the web build as is; `await init()` loads the .wasm (the bundler
// copies it as an asset). Vite users: optimizeDeps: { exclude: ["sluicegate"] }.
export * from "../pkg-sim/sluicegate.js";
export { default } from "../pkg-sim/sluicegate.js";
export { SimulationError, checkConfig, edgeRulesPath, inlineEdgeRules, runSimulation, selfTest, simulate } from "./sim.js";
