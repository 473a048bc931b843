// init() for the browser entries: wasm-bindgen's own, with an error that says what to
// configure when the .wasm it fetched (next to the module, `new URL(…, import.meta.url)`)
// turned out not to be WebAssembly: a bundler moved the module away from its .wasm, and the
// server answered something else (an HTML page, a 404) for it.

/** Whether `error` says the .wasm was not there: not WebAssembly (an HTML page), or a 404 (wasm-bindgen's "failed to fetch Wasm: 404 …"). */
function notTheWasm(error) {
  if (typeof WebAssembly !== "undefined" && error instanceof WebAssembly.CompileError) return true;
  return error instanceof Error && /^failed to fetch Wasm: 4\d\d\b/.test(error.message);
}

/** The error to throw for `error`, thrown by `entry`'s init() loading its default .wasm from `moduleUrl`. */
export function explainInitFailure(error, moduleUrl, entry) {
  if (!notTheWasm(error)) return error;
  const url = String(moduleUrl);
  const what = `sluicegate: init() fetched ${entry}'s .wasm next to ${url} and got something else (${error.message}).`;
  const message = /\/\.vite\/deps(_temp_\w+)?\//.test(url)
    ? `${what} Vite's dependency pre-bundling moved ${entry} into .vite/deps, away from its .wasm: ` +
      `add \`optimizeDeps: { exclude: ["sluicegate"] }\` to vite.config (Vite 8 and later need nothing).`
    : `${what} The bundler did not copy the .wasm beside its output. With esbuild, import the file and pass its URL: ` +
      `\`import wasm from "${entry}/wasm"\` built with \`--loader:.wasm=file\`, then ` +
      `\`await init({ module_or_path: new URL(wasm, import.meta.url) })\`. Elsewhere, serve the .wasm and pass its URL the same way.`;
  return new Error(message, { cause: error });
}

/** `init` (wasm-bindgen's default export) for the entry named `entry`, with that error. */
export function guardInit(init, entry) {
  return async function initWasm(options) {
    try {
      return await init(options);
    } catch (error) {
      const defaultUrl = options === undefined || (typeof options === "object" && options !== null && "module_or_path" in options && options.module_or_path === undefined);
      throw defaultUrl ? explainInitFailure(error, import.meta.url, entry) : error;
    }
  };
}
