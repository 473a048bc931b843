// What the package takes from its host, as small structural types: each names only what the
// package uses, and the host's own objects (localStorage, indexedDB, navigator.locks, fetch's
// inputs, WebAssembly modules) fit them. The declarations then compile in a browser project
// (lib "dom"), a Node one (@types/node, no DOM) and a Worker one (@cloudflare/workers-types).

/** A synchronous key-value storage: `localStorage`, `sessionStorage`, or any `{ getItem, setItem }`. */
export interface StorageLike {
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
}

/** An IndexedDB factory: `indexedDB` in browsers, or an implementation for Node (e.g. fake-indexeddb). */
export interface IDBFactoryLike {
  open(name: string, version?: number): object;
}

/** Web Locks: `navigator.locks`, or anything that runs `callback` holding the lock `name`. */
export interface LockManagerLike {
  request<T>(name: string, callback: (lock: unknown) => T): Promise<Awaited<T>>;
}

/** What `fetch` takes as its first argument (the DOM's `RequestInfo | URL`). */
export type FetchInput = string | URL | Request;

/** Bytes: an `ArrayBuffer` or a view of one (a `Uint8Array`, a Node `Buffer`). */
export type BufferSourceLike = ArrayBuffer | ArrayBufferView;

// The host's WebAssembly types where it declares them (the DOM, Workers), else the part the
// package's declarations need: Node's type definitions declare no WebAssembly namespace.
type Host = typeof globalThis;
/** A compiled WebAssembly module (`WebAssembly.Module`). */
export type WasmModule = Host extends { WebAssembly: { Module: { prototype: infer M } } } ? M : object;
/** A WebAssembly memory (`WebAssembly.Memory`). */
export type WasmMemory = Host extends { WebAssembly: { Memory: { prototype: infer M } } } ? M : { readonly buffer: ArrayBuffer; grow(delta: number): number };
/** A WebAssembly table (`WebAssembly.Table`). */
export type WasmTable = Host extends { WebAssembly: { Table: { prototype: infer T } } }
  ? T
  : { readonly length: number; get(index: number): unknown; set(index: number, value?: unknown): void; grow(delta: number, value?: unknown): number };

// wasm-bindgen's classes are disposable (`using x = new PacerCore()`): `Symbol.dispose` as
// TypeScript 5.2's esnext.disposable library and @types/node declare it, for projects whose
// `lib` predates it (es2023, a Worker's).
declare global {
  interface SymbolConstructor {
    readonly dispose: unique symbol;
  }
}
