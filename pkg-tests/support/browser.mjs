// Headless Chromium for the end-to-end tests: Debian's /usr/bin/chromium driven by
// playwright-core, with the flags this machine needs (no sandbox as root, no background
// networking: the network is closed).
import { chromium } from "playwright-core";

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
