// What `sluicegate/worker` and `sluicegate/hono` are under Node (package.json's "node"
// condition: required, and imported through workers-only.js): an error that says where to
// go instead.
throw new Error(
  "sluicegate/worker and sluicegate/hono run in Cloudflare Workers only: they import their .wasm as a module, which Node cannot load. " +
    "In Node use sluicegate/middleware (Express, or Hono on Node) or sluicegate/limit; to run a Worker locally, use wrangler dev (or Miniflare).",
);
