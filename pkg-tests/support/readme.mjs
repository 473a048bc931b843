// The README's code samples, as the tests that run them read them.
import assert from "node:assert/strict";

/** The README's js/ts fenced blocks: `{ line, lang, code, where }`. */
export function readmeSamples(text) {
  const samples = [];
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(js|ts)\s*$/.exec(lines[i]);
    if (!open) continue;
    const end = lines.indexOf("```", i + 1);
    assert.ok(end > i, `README.md:${i + 1}: unclosed code block`);
    const directive = /^<!--\s*readme-sample:\s*([\w\s]+?)\s*-->$/.exec(lines[i - 1] ?? "");
    const where = directive ? directive[1].split(/\s+/) : ["node"];
    for (const w of where) assert.ok(["node", "browser", "workerd", "worker"].includes(w), `README.md:${i}: unknown place ${w}`);
    samples.push({ line: i + 1, lang: open[1], code: `${lines.slice(i + 1, end).join("\n")}\n`, where });
    i = end;
  }
  return samples;
}
