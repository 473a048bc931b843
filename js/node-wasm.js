// The Node entries' .wasm, read from beside the web build (Node only: node:fs).
import { readFileSync } from "node:fs";

/**
 * The error to throw when the Node entry of `entry` cannot read its .wasm at `wasmUrl`: most
 * often a server bundled with the package inside (esbuild `--platform=node --bundle`), whose
 * bundle no longer sits beside the .wasm.
 */
function explainReadFailure(error, wasmUrl, entry) {
  if (error?.code !== "ENOENT") return error;
  const message =
    `sluicegate: ${entry} cannot read its .wasm at ${wasmUrl.pathname ?? wasmUrl} (ENOENT). Bundling a Node server? ` +
    'Leave the package out of the bundle (esbuild `--packages=external`, or `external: ["sluicegate"]`), so that it loads ' +
    "from node_modules beside its .wasm files; or copy the package's pkg*/ folders where the bundle's import.meta.url points.";
  return new Error(message, { cause: error });
}

/** The bytes of `entry`'s .wasm at `wasmUrl`, or an error that says why it is not there. */
export function readWasm(wasmUrl, entry) {
  try {
    return readFileSync(wasmUrl);
  } catch (error) {
    throw explainReadFailure(error, wasmUrl, entry);
  }
}
