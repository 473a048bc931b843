// What `sluicegate/worker` and `sluicegate/hono` are when imported under Node: the error of
// workers-only.cjs (what require() gets), which says where to go instead.
import "./workers-only.cjs";
