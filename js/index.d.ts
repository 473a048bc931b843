export * from "../pkg/sluicegate.js";
export { default } from "../pkg/sluicegate.js";
export * from "./pacer.js";
export * from "./cache.js";
export * from "./batch.js";
export * from "./forecasts.js";
