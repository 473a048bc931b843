#!/usr/bin/env python3
"""Random configurations and traces through the reference simulator and `sluicegate sim`;
every --json document (and exit status) must be identical.

    python3 scripts/sim-parity-fuzz.py REFERENCE_RATE_SIM_PY [CASES] [SEED]

Needs target/release/sluicegate (cargo build --release --features cli). Writes its inputs to
target/sim-fuzz/ and stops at the first difference, leaving that case there.
"""
import json, os, random, subprocess, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REF = sys.argv[1]
CASES = int(sys.argv[2]) if len(sys.argv) > 2 else 300
rng = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 1)
OUT = os.path.join(ROOT, "target", "sim-fuzz")
BIN = os.path.join(ROOT, "target", "release", "sluicegate")
os.makedirs(OUT, exist_ok=True)

CLIENTS = ["app", "web", "bot", "partner", "scraper", "a b", "Z"]
ENDPOINTS = ["/", "/login", "/orders", "/orders/bulk", "/search"]


def policy(i):
    algo = rng.choice(["token_bucket", "fixed_window", "sliding_log", "sliding_counter"])
    p = {"name": rng.choice([f"p{i}", "dup", f"policy {i}"]), "algorithm": algo,
         "key": rng.choice(["client", "endpoint", "client+endpoint", "global"])}
    if algo == "token_bucket":
        if rng.random() < 0.7:
            p["rate"] = rng.choice([0.5, 1, 2, 5, 10, 3.3])
            if rng.random() < 0.7:
                p["burst"] = rng.choice([1, 2, 5, 10, 20])
        else:
            p["limit"], p["window_s"] = rng.choice([5, 10, 60]), rng.choice([1, 10, 60])
    else:
        p["limit"] = rng.choice([1, 3, 5, 10, 30, 100, 1500])
        p["window_s"] = rng.choice([1, 5, 10, 60])
    if rng.random() < 0.3:
        p["endpoints"] = rng.sample(ENDPOINTS, rng.randint(1, 2))
    if rng.random() < 0.2:
        p["clients"] = rng.sample(CLIENTS, 2)
    elif rng.random() < 0.2:
        p["exclude_clients"] = rng.sample(CLIENTS, 1)
    return p


def client(i):
    c = {"name": rng.choice(CLIENTS), "kind": rng.choice(["legit", "abusive", "unknown"]),
         "endpoint": rng.choice(ENDPOINTS), "retry": rng.choice(["none", "immediate", "backoff", "honor"])}
    pattern = rng.choice(["steady", "poisson", "burst"])
    c["pattern"] = pattern
    if pattern == "burst":
        c["burst"], c["every_s"] = rng.choice([5, 20, 60]), rng.choice([0.01, 5, 30, 60])
    else:
        c["rps"] = rng.choice([0.5, 1, 3, 7.5, 20])
    if rng.random() < 0.3:
        c["cost"] = rng.choice([2, 0.5, 3])
    if rng.random() < 0.3:
        c["start"] = rng.choice([0, 10, 59.5])
    if rng.random() < 0.3:
        c["max_retries"] = rng.choice([0, 1, 5])
    return c


def config():
    cfg = {"service": "fuzz", "duration_s": rng.choice([30, 60, 120]), "seed": rng.randint(0, 10**6),
           "policies": [policy(i) for i in range(rng.randint(1, 4))],
           "clients": [client(i) for i in range(rng.randint(1, 5))]}
    if rng.random() < 0.7:
        cfg["capacity_rps"] = rng.choice([5, 20, 80])
    return cfg


def trace():
    rows, t = [], 0.0
    for _ in range(rng.randint(1, 3000)):
        t += rng.choice([0, 0, 0.001, 0.01, 0.1, rng.random()])
        row = [f"{t:.3f}", rng.choice(CLIENTS), rng.choice(ENDPOINTS + [""])]
        row.append(rng.choice(["", "1", "2", "0.5"]))
        rows.append(row)
    if rng.random() < 0.2:
        rng.shuffle(rows)  # out of time order: read again and sorted
    return "t,client,endpoint,cost\n" + "".join(",".join(r) + "\n" for r in rows)


def run(argv):
    p = subprocess.run(argv, capture_output=True, text=True)
    return p.returncode, p.stdout


for n in range(CASES):
    cfg_path = os.path.join(OUT, "config.json")
    with open(cfg_path, "w") as f:
        json.dump(config(), f)
    args = [cfg_path, "--json"]
    if rng.random() < 0.4:
        tr_path = os.path.join(OUT, "trace.csv")
        with open(tr_path, "w") as f:
            f.write(trace())
        args += ["--trace", tr_path]
    want = run([sys.executable, REF] + args)
    got = run([BIN, "sim"] + args)
    if want[0] == 1 and not want[1]:
        continue  # the reference crashed (a traceback): not a parity case
    if want != got:
        print(f"case {n}: DIFFERENT (exit {want[0]} vs {got[0]}); inputs left in {OUT}")
        sys.exit(1)
print(f"{CASES} random cases: identical")
