// Headless Chromium for the end-to-end tests: Debian's /usr/bin/chromium driven by
// playwright-core, with the flags this machine needs (no sandbox as root, no background
// networking: the network is closed).
import { chromium } from "playwright-core";
import { startEdge } from "../../js/testing.js";

export const CHROMIUM_ARGS = [
  "--no-sandbox",
  "--headless",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

export function launchChromium(timeout) {
  return chromium.launch({ executablePath: "/usr/bin/chromium", timeout, args: CHROMIUM_ARGS });
}

/**
 * Record a page's script errors and every request that leaves `origin` (pages must load
 * nothing from elsewhere). Chromium logs each non-2xx fetch ("Failed to load resource"):
 * those are expected where pages meet 429s, so they are not errors.
 */
export function watchPage(page, origin, { pageErrors = [], foreignRequests = [] } = {}) {
  page.on("pageerror", (err) => pageErrors.push(String(err)));
  page.on("console", (msg) => {
    if (msg.type() === "error" && !msg.text().startsWith("Failed to load resource")) pageErrors.push(msg.text());
  });
  page.on("request", (req) => {
    const url = req.url();
    if (!url.startsWith(origin) && !url.startsWith("data:")) foreignRequests.push(url);
  });
  return { pageErrors, foreignRequests };
}

/**
 * The dev worker in workerd (`startEdge(edgeOptions)`) and one watched Chromium page opened
 * on `pathname`: `{ edge, browser, page, response, pageErrors, foreignRequests, close }`.
 */
export async function openEdgePage(pathname, { edgeOptions = {}, timeout = 15_000 } = {}) {
  const edge = await startEdge(edgeOptions);
  const browser = await launchChromium(timeout);
  const page = await browser.newPage({ viewport: { width: 1100, height: 900 } });
  page.setDefaultTimeout(timeout);
  const watched = watchPage(page, edge.url);
  const response = await page.goto(`${edge.url}${pathname}`, { waitUntil: "load", timeout });
  const close = async () => {
    await browser.close().catch(() => {});
    await edge.close().catch(() => {});
  };
  return { edge, browser, page, response, ...watched, close };
}
