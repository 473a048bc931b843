// The code samples of README.md and the guide (docs/*.md), as the tests that run them read them.
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";

/** A markdown text's js/ts fenced blocks: `{ line, lang, code, where }`; `file` names it in messages. */
export function readmeSamples(text, file = "README.md") {
  const samples = [];
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(js|ts)\s*$/.exec(lines[i]);
    if (!open) continue;
    const end = lines.indexOf("```", i + 1);
    assert.ok(end > i, `${file}:${i + 1}: unclosed code block`);
    const directive = /^<!--\s*readme-sample:\s*([\w\s]+?)\s*-->$/.exec(lines[i - 1] ?? "");
    const where = directive ? directive[1].split(/\s+/) : ["node"];
    for (const w of where) assert.ok(["node", "browser", "workerd", "worker"].includes(w), `${file}:${i}: unknown place ${w}`);
    samples.push({ file, line: i + 1, lang: open[1], code: `${lines.slice(i + 1, end).join("\n")}\n`, where });
    i = end;
  }
  return samples;
}

/** The user's documents, README.md and each guide page: `[file, text]`, file relative to `root`. */
export function documents(root) {
  const pages = readdirSync(path.join(root, "docs"))
    .filter((f) => f.endsWith(".md"))
    .sort()
    .map((f) => `docs/${f}`);
  return ["README.md", ...pages].map((file) => [file, readFileSync(path.join(root, file), "utf8")]);
}

/** Every sample of README.md and the guide, each with its file. */
export function guideSamples(root) {
  return documents(root).flatMap(([file, text]) => readmeSamples(text, file));
}

/** The section of `text` under `heading` (up to the next heading of its level or above). */
export function section(text, heading, file) {
  const start = text.indexOf(`\n${heading}\n`);
  assert.ok(start >= 0, `${file} has ${heading}`);
  const level = heading.split(" ")[0];
  const next = new RegExp(`\\n#{1,${level.length}} `, "g");
  next.lastIndex = start + heading.length + 2;
  const end = next.exec(text)?.index ?? -1;
  return text.slice(start, end < 0 ? undefined : end);
}
