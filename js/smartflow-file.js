// The Node file store for SmartFlow: the cache file of the Smart Flow specification (§7).
// Imported by the Node entry only, so the browser and workerd entries never see node:fs.
import { readFileSync } from "node:fs";
import { mkdir, rename, unlink, writeFile } from "node:fs/promises";
import { homedir } from "node:os";
import { dirname, join } from "node:path";
/** @import { SmartFlowStore } from "./smartflow.js" */

let seq = 0;

/**
 * The specification's cache file, `~/.meraki/.cache/rate_limit_cache.json` (the home
 * directory as it is now: `HOME`, or the account's); null when there is no home directory.
 * @returns {string | null}
 */
export function defaultCachePath() {
  let home = "";
  try {
    home = homedir();
  } catch {
    // no HOME and no account entry: no default file
  }
  return home ? join(home, ".meraki", ".cache", "rate_limit_cache.json") : null;
}

/**
 * `{ load, save }` over a file: load reads it (a missing file, or a path through something
 * that is not a directory, is no cache), save writes a temporary file beside it and renames
 * it over, so a crash mid-write never leaves half a file behind. Missing directories are
 * created.
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
        if (error?.code === "ENOENT" || error?.code === "ENOTDIR") return null;
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
