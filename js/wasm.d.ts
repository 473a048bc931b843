// sluicegate/wasm, sluicegate/edge/wasm, sluicegate/smartflow/wasm, sluicegate/sim/wasm: each
// entry's .wasm file, for bundlers that copy an imported file and hand over its URL
// (esbuild's `--loader:.wasm=file`), to pass to init():
//   import wasm from "sluicegate/wasm";
//   await init({ module_or_path: new URL(wasm, import.meta.url) });

/** The .wasm file's URL, relative to the bundle, as the bundler's file loader gives it. */
declare const url: string;
export default url;
