// A seeded trace for `sluicegate replay`: steady clients that stay under the /api/ rule
// (20 per 10 s per ip.src and cf.colo.id, then blocked 10 s), bursty ones that trip its
// blocks, two colos, IPv4 clients and IPv6 ones of which two share a /64, and requests to a
// path no rule counts.

/** A seeded xorshift32: numbers in [0, 1). */
function xorshift(seed) {
  let state = seed >>> 0 || 1;
  return () => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return (state >>> 0) / 2 ** 32;
  };
}

/** The trace as CSV text: `count` requests over `durationS` seconds. */
export function replayTrace({ count = 5_000, durationS = 600, seed = 7 } = {}) {
  const random = xorshift(seed);
  // rps: a steady client's mean rate; burst: a bursty one's burst size (at 10–20 per second).
  const clients = [
    { ip: "198.51.100.7", colo: "AMS", rps: 1.2, path: "/api/orders" },
    { ip: "198.51.100.7", colo: "FRA", burst: 30, path: "/api/search" }, // the same address at another colo
    { ip: "203.0.113.20", colo: "AMS", burst: 40, path: "/api/search" },
    { ip: "203.0.113.21", colo: "FRA", rps: 1.5, path: "/api/orders" },
    { ip: "2001:db8:1::1", colo: "AMS", burst: 15, path: "/api/export" },
    { ip: "2001:db8:1::2", colo: "AMS", burst: 15, path: "/api/export" }, // the same /64 as above: one client
    { ip: "2001:db8:2::1", colo: "FRA", rps: 1.0, path: "/api/orders" },
    { ip: "192.0.2.1", colo: "AMS", rps: 2.0, path: "/index.html" },
  ];
  const rows = [];
  for (const c of clients) {
    if (c.rps) {
      for (let t = random() / c.rps; t < durationS; t += (0.5 + random()) / c.rps) rows.push([t, c]);
    }
  }
  const bursty = clients.filter((c) => c.burst);
  while (rows.length < count) {
    const c = bursty[Math.floor(random() * bursty.length)];
    let t = random() * (durationS - 5);
    const n = Math.round(c.burst * (0.6 + random() * 0.8));
    for (let i = 0; i < n; i++) {
      t += 0.05 + random() * 0.05;
      rows.push([t, c]);
    }
  }
  rows.sort((a, b) => a[0] - b[0]); // then the last burst's surplus is cut from the end
  const lines = rows.slice(0, count).map(([t, c]) => `${t.toFixed(3)},${c.ip},${c.colo},${c.path}`);
  return `t,ip.src,cf.colo.id,endpoint\n${lines.join("\n")}\n`;
}

/**
 * A seeded trace over the app's own routes (worker/examples/traffic.json's rules): steady and
 * bursty clients at two or three colos, GETs to the token-bucket routes under the /api/ rule,
 * POSTs to the analysis and destination routes, and requests carrying an `x-api-key` header
 * (for a rule that counts by it). `count` requests over `durationS` seconds.
 */
export function appTrace({ count = 2_000, durationS = 120, seed = 11 } = {}) {
  const random = xorshift(seed);
  const routes = [
    ["GET", "/api/geocode"],
    ["GET", "/api/wildfires"],
    ["GET", "/api/smoke"],
    ["POST", "/api/analyze"],
    ["POST", "/api/destinations"],
    ["GET", "/api/geocode"],
  ];
  const clients = [
    { ip: "198.51.100.7", colo: "AMS", key: "k-alpha" },
    { ip: "198.51.100.7", colo: "FRA", key: "k-alpha" }, // the same address and key at another colo
    { ip: "203.0.113.20", colo: "AMS", key: "" },
    { ip: "203.0.113.21", colo: "LHR", key: "k-beta" },
    { ip: "2001:db8:1::1", colo: "AMS", key: "k-beta" },
    { ip: "2001:db8:1::2", colo: "FRA", key: "" }, // the same /64 as above, at another colo
  ];
  const rows = [];
  while (rows.length < count) {
    const c = clients[Math.floor(random() * clients.length)];
    let t = random() * (durationS - 3);
    // bursts of 3–14 requests, 20–120 ms apart, each to one route of the client's pick
    const n = 3 + Math.floor(random() * 12);
    for (let i = 0; i < n; i++) {
      const [method, path] = routes[Math.floor(random() * routes.length)];
      t += 0.02 + random() * 0.1;
      rows.push([t, c, method, path]);
    }
  }
  rows.sort((a, b) => a[0] - b[0]);
  const lines = rows.slice(0, count).map(([t, c, method, path]) => `${t.toFixed(3)},${c.ip},${c.colo},${method},${path},${c.key}`);
  return `t,ip.src,cf.colo.id,method,endpoint,header:X-Api-Key\n${lines.join("\n")}\n`;
}
