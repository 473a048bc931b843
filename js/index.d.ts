export * from "../pkg/sluicegate.js";
export { default } from "../pkg/sluicegate.js";
export * from "./pacer.js";
