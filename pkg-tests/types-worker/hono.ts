// Compiled with `tsc --noEmit` by the test suite: a Hono app on Workers with the edge's rules
// as middleware (sluicegate/hono).
import { Hono } from "hono";
import { RateLimiter, rateLimit } from "sluicegate/hono";

type Bindings = { RATE_LIMITER: DurableObjectNamespace<RateLimiter> };

const app = new Hono<{ Bindings: Bindings }>();
app.use("/api/*", rateLimit({ rules: '{"rules": []}' }));
app.get("/api/hello", (c) => c.json({ hello: "world" }));

export default app;
export { RateLimiter };
