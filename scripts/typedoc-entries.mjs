// A TypeDoc plugin (typedoc.json): each module is named by the import path a user writes,
// `sluicegate/limit`, not by its declaration file (`entries/limit`, `middleware`).
import { Converter } from "typedoc";

/** @param {import("typedoc").Application} app */
export function load(app) {
  app.converter.on(Converter.EVENT_RESOLVE_BEGIN, (context) => {
    for (const module of context.project.children ?? []) {
      const entry = module.name.replace(/^entries\/?/, "");
      module.name = entry === "" ? "sluicegate" : `sluicegate/${entry}`;
    }
  });
}
