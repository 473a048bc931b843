// The Node file store for SmartFlow: the cache file of the Smart Flow specification (§7).
// Imported by the Node entry only, so the browser and workerd entries never see node:fs.
import { readFileSync } from "node:fs";
import { mkdir, rename, unlink, writeFile } from "node:fs/promises";
import { dirname } from "node:path";
/** @import { SmartFlowStore } from "./smartflow.js" */

let seq = 0;

/**
 * `{ load, save }` over a file: load reads it (a missing file is no cache), save writes a
 * temporary file beside it and renames it over, so a crash mid-write never leaves half a
 * file behind. Missing directories are created.
 * @param {string} path
 * @returns {SmartFlowStore & { readonly path: string }}
 */
export function fileStore(path) {
  if (typeof path !== "string" || !path) {
    throw new TypeError(`path must be a non-empty string, got ${typeof path === "string" ? '""' : typeof path}`);
  }
  return {
    path,
    load() {
      try {
        return readFileSync(path, "utf8");
      } catch (error) {
        if (error?.code === "ENOENT") return null;
        throw error;
      }
    },
    async save(text) {
      await mkdir(dirname(path), { recursive: true });
      const temporary = `${path}.${process.pid}.${++seq}.tmp`;
      try {
        await writeFile(temporary, text);
        await rename(temporary, path);
      } catch (error) {
        await unlink(temporary).catch(() => {});
        throw error;
      }
    },
  };
}
