// init() for the browser entries, and the guard of their exports until it has run.
//
// init() is wasm-bindgen's own, with an error that says what to configure when the .wasm it
// fetched (next to the module, `new URL(…, import.meta.url)`) turned out not to be
// WebAssembly: a bundler moved the module away from its .wasm, and the server answered
// something else (an HTML page, a 404) for it.
//
// The guard: in a browser nothing is loaded until init() resolves, and wasm-bindgen's glue
// called before then fails with "Cannot read properties of undefined (reading
// 'pacercore_new')". Each export of a browser entry is its class or function behind a Proxy
// that, until then, throws an error naming init() and what was called instead.

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

/** Where the guide explains init() in a browser (its pages ship in the package). */
const GUIDE = "docs/browser.md, “init() first, in a browser”";

const AsyncFunction = Object.getPrototypeOf(async () => {}).constructor;

/**
 * A browser entry's `init` and `requires(value, name)`, which puts an export behind the guard.
 * @param {(options?: unknown) => Promise<unknown>} init wasm-bindgen's default export of the entry's build
 * @param {string} entry the import path, e.g. "sluicegate/limit"
 */
export function browserEntry(init, entry) {
  let loaded = false;

  /**
   * wasm-bindgen's `init`, with the error above when it fetched the default .wasm and got something else.
   * @param {unknown} [options]
   */
  async function initWasm(options) {
    let exports;
    try {
      exports = await init(options);
    } catch (error) {
      const defaultUrl = options === undefined || (typeof options === "object" && options !== null && "module_or_path" in options && options.module_or_path === undefined);
      throw defaultUrl ? explainInitFailure(error, import.meta.url, entry) : error;
    }
    loaded = true;
    return exports;
  }

  /**
   * @param {string} called as the user wrote it: `new Pacer()`, `runBatch()`, `SmartFlowCore.withoutQuery()`
   * @param {string} name the export it goes through, for the import line
   */
  const notLoaded = (called, name) =>
    new Error(
      `${entry}: call \`await init()\` before \`${called}\` (in a browser the .wasm is fetched by init(), the entry's default export: ` +
        `\`import init, { ${name} } from "${entry}"; await init();\`; see ${GUIDE})`,
    );

  /**
   * `fn` behind the guard, as `called()` through the export `name`: an async function rejects rather than throws.
   * @param {Function} fn
   * @param {string} called
   * @param {string} name
   */
  const call = (fn, called, name) => (/** @type {unknown} */ thisArg, /** @type {unknown[]} */ args) => {
    if (!loaded) {
      const error = notLoaded(`${called}()`, name);
      if (fn instanceof AsyncFunction) return Promise.reject(error);
      throw error;
    }
    return Reflect.apply(fn, thisArg, args);
  };

  /**
   * `value` (an export named `name`) behind the guard: calling it, constructing it or calling
   * one of its static methods before init() has resolved throws; afterwards it is `value`
   * in every way (`instanceof`, subclasses, statics), but for one check per call.
   * @template T
   * @param {T} value
   * @param {string} name
   * @returns {T}
   */
  function requires(value, name) {
    if (typeof value !== "function") return value;
    const apply = call(value, name, name);
    /** @type {Map<PropertyKey, Function>} */
    const statics = new Map();
    return new Proxy(value, {
      apply: (_target, thisArg, args) => apply(thisArg, args),
      construct(target, args, newTarget) {
        if (!loaded) throw notLoaded(`new ${name}()`, name);
        return Reflect.construct(target, args, newTarget);
      },
      get(target, key, receiver) {
        const member = Reflect.get(target, key, receiver);
        // a static method of the class itself (not `prototype`, nor what every function inherits)
        if (loaded || typeof member !== "function" || key === "prototype" || typeof key !== "string" || !Object.hasOwn(target, key)) return member;
        let guarded = statics.get(key);
        if (guarded === undefined) {
          const staticCall = call(member, `${name}.${key}`, name);
          /**
           * @this {unknown}
           * @param {unknown[]} args
           */
          guarded = function (...args) {
            return staticCall(this, args);
          };
          statics.set(key, guarded);
        }
        return guarded;
      },
    });
  }

  return { init: initWasm, requires };
}
