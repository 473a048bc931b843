// sluicegate/edge (rules validation, client identity, token bucket). Browsers and bundlers: the web build as is; `await init()` loads the .wasm (the bundler
// copies it as an asset). Vite users: optimizeDeps: { exclude: ["sluicegate"] }.
export * from "../pkg-edge/sluicegate.js";
export { default } from "../pkg-edge/sluicegate.js";
