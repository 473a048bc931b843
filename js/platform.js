// What the package takes from its host, as small structural types: each names only what the
// package uses, and the host's own objects (localStorage, indexedDB, navigator.locks, fetch's
// inputs) fit them. The declarations then compile in a browser project (lib "dom"), a Node
// one (@types/node, no DOM) and a Worker one (@cloudflare/workers-types). Types only: this
// module has no code.

/**
 * A synchronous key-value storage: `localStorage`, `sessionStorage`, or any `{ getItem, setItem }`.
 * @typedef {{ getItem(key: string): string | null; setItem(key: string, value: string): void }} StorageLike
 */

/**
 * An IndexedDB factory: `indexedDB` in browsers, or an implementation for Node (e.g. fake-indexeddb).
 * @typedef {{ open(name: string, version?: number): object }} IDBFactoryLike
 */

/**
 * Web Locks: `navigator.locks`, or anything that runs `callback` holding the lock `name`.
 * @typedef {{ request<T>(name: string, callback: (lock: unknown) => T): Promise<Awaited<T>> }} LockManagerLike
 */

/**
 * What `fetch` takes as its first argument (the DOM's `RequestInfo | URL`).
 * @typedef {string | URL | Request} FetchInput
 */

export {};
