// Checks every link of the built guide (target/docs/, scripts/docs.sh) and of README.md:
// each relative link names a file that exists in the site (the API reference included), and
// each #anchor an id on that page. A broken link fails the build, naming the page and link.
//
//   node scripts/check-docs.mjs [SITE_DIR]
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const SITE = path.resolve(process.argv[2] ?? path.join(ROOT, "target", "docs"));
/** The API reference's own pages are generated whole; their links are the generators'. */
const GENERATED = [path.join(SITE, "api") + path.sep];

const problems = [];
const idsOf = new Map();
/** The ids a page's anchors may name (mdBook headings, TypeDoc and rustdoc anchors). */
function ids(file) {
  if (!idsOf.has(file)) {
    const html = readFileSync(file, "utf8");
    idsOf.set(file, new Set([...html.matchAll(/\s(?:id|name)="([^"]*)"/g)].map((m) => m[1])));
  }
  return idsOf.get(file);
}
const isExternal = (href) => /^[a-z][a-z0-9+.-]*:/i.test(href) || href.startsWith("//");

/** Checks `href` written in `from` (a file), resolving it against `base` (a directory). */
function check(from, href, base, root) {
  if (isExternal(href) || href === "") return;
  const [rawPath, anchor] = href.split("#");
  const target = rawPath === "" ? from : path.resolve(base, decodeURIComponent(rawPath));
  const where = `${path.relative(ROOT, from)}: ${href}`;
  if (!target.startsWith(root + path.sep) && target !== root) return problems.push(`${where}: leaves ${path.relative(ROOT, root)}/`);
  let file = target;
  if (existsSync(file) && statSync(file).isDirectory()) file = path.join(file, "index.html");
  if (!existsSync(file)) return problems.push(`${where}: no such file`);
  if (anchor && file.endsWith(".html") && !ids(file).has(decodeURIComponent(anchor))) problems.push(`${where}: no #${anchor} on ${path.relative(ROOT, file)}`);
}

function pages(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return GENERATED.includes(p + path.sep) ? [] : pages(p);
    return p.endsWith(".html") ? [p] : [];
  });
}

if (!existsSync(path.join(SITE, "index.html"))) {
  console.error(`check-docs: ${SITE} has no index.html: build the guide first (bash scripts/docs.sh)`);
  process.exit(1);
}
let links = 0;
for (const page of pages(SITE)) {
  // 404.html is served from any depth and links from the site's root (site-url).
  if (path.basename(page) === "404.html") continue;
  const html = readFileSync(page, "utf8");
  for (const [, href] of html.matchAll(/<a\s[^>]*?href="([^"]*)"/g)) {
    links++;
    check(page, href.replaceAll("&amp;", "&"), path.dirname(page), SITE);
  }
}
// README.md links into the guide (docs/X.md#a is the built X.html#a) and the repository.
const readme = path.join(ROOT, "README.md");
for (const [, href] of readFileSync(readme, "utf8").matchAll(/\]\(([^)\s]+)\)/g)) {
  links++;
  const m = /^docs\/([^#]+)\.md(#.*)?$/.exec(href);
  if (m) check(readme, `${m[1]}.html${m[2] ?? ""}`, SITE, SITE);
  else check(readme, href, ROOT, ROOT);
}
if (problems.length) {
  console.error(`check-docs: ${problems.length} broken link(s):\n${problems.join("\n")}`);
  process.exit(1);
}
console.log(`check-docs: ${links} links in ${path.relative(ROOT, SITE)}/ and README.md, none broken`);
