export * from "../pkg-edge/sluicegate.js";
export { default } from "../pkg-edge/sluicegate.js";
export { TokenBucket } from "./token-bucket.js";
