// Where a pacer's ledger is stored when it is shared: each store runs one update at a time,
// atomically across every pacer (tab) using it, and keeps the ledger as the core writes it:
// [atMs, weight, owner, seq, dispatched] per entry.
/**
 * @import { PacerMachine } from "../pkg/sluicegate.js"
 * @import { IDBFactoryLike, LockManagerLike, StorageLike } from "./platform.js"
 * @import { PacerPersistence } from "./pacer.js"
 */
const rowsOf = (value) => (Array.isArray(value) ? value : []);

/** A ledger in a synchronous Web Storage, under a Web Lock when given: one JavaScript context. */
class StorageLedger {
  /**
   * @param {string} key
   * @param {StorageLike} storage
   * @param {LockManagerLike | null | undefined} locks
   */
  constructor(key, storage, locks) {
    this.key = key;
    this.storage = storage;
    this.locks = locks;
  }
  seen() {
    try {
      return rowsOf(JSON.parse(this.storage.getItem(this.key) ?? "[]"));
    } catch {
      return [];
    }
  }
  update(fn) {
    const run = () => {
      const [result, next] = fn(this.seen());
      this.storage.setItem(this.key, JSON.stringify(next));
      return result;
    };
    return this.locks ? this.locks.request(`${this.key}:lock`, run) : Promise.resolve().then(run);
  }
}

/** A ledger in IndexedDB: each update is one read-write transaction, atomic across tabs. */
class IndexedDbLedger {
  /** @type {Promise<IDBDatabase> | null} */
  #db = null;
  #seen = [];
  seen() {
    return this.#seen;
  }
  /**
   * @param {string} key
   * @param {IDBFactoryLike} indexedDB
   */
  constructor(key, indexedDB) {
    this.key = key;
    this.indexedDB = indexedDB;
  }
  update(fn) {
    this.#db ??= new Promise((resolve, reject) => {
      const open = /** @type {IDBOpenDBRequest} */ (this.indexedDB.open("sluicegate-pacer", 1));
      open.onupgradeneeded = () => open.result.createObjectStore("ledgers");
      open.onsuccess = () => resolve(open.result);
      open.onerror = () => reject(open.error);
    });
    return this.#db.then(
      (db) =>
        new Promise((resolve, reject) => {
          const tx = db.transaction("ledgers", "readwrite");
          const store = tx.objectStore("ledgers");
          const get = store.get(this.key);
          let result, failure;
          get.onsuccess = () => {
            try {
              const [value, next] = fn(rowsOf(get.result));
              result = value;
              this.#seen = next;
              store.put(next, this.key);
            } catch (error) {
              failure = error;
              tx.abort();
            }
          };
          tx.oncomplete = () => resolve(result);
          tx.onabort = tx.onerror = () => reject(failure ?? tx.error ?? new Error("the pacer ledger could not be updated"));
        }),
    );
  }
}

/**
 * A pacer core's ledger shared through the store a `persist` option names (null: none, the
 * core's memory is the ledger). `run(fn)` is one atomic update: the core takes the stored
 * entries as the truth, `fn` runs on it, and the core's entries are stored. `peek()` syncs
 * the core with the ledger as last seen (a synchronous storage: as stored now).
 * @param {string | PacerPersistence | null} persist
 * @param {PacerMachine} core
 * @param {() => string} owner
 */
export function sharedLedger(persist, core, owner) {
  const store = storeFor(persist);
  if (!store) return null;
  const run = (fn) =>
    store.update((rows) => {
      core.setOwner(owner());
      core.sync(rows);
      return [fn(), core.entries()];
    });
  return { run, peek: () => core.sync(store.seen()) };
}

/** @param {string | PacerPersistence | null} persist */
function storeFor(persist) {
  if (!persist) return null;
  const where = typeof persist === "string" ? { key: persist } : persist;
  const key = where.key;
  if (typeof key !== "string" || key === "") throw new TypeError("persist.key must be a non-empty string");
  if (where.storage) return new StorageLedger(key, where.storage, where.locks === undefined ? globalThis.navigator?.locks : where.locks);
  const indexedDB = where.indexedDB ?? globalThis.indexedDB;
  if (indexedDB) return new IndexedDbLedger(key, indexedDB);
  if (globalThis.localStorage) return new StorageLedger(key, globalThis.localStorage, globalThis.navigator?.locks);
  throw new TypeError("persist needs IndexedDB or a storage; neither is available here");
}
