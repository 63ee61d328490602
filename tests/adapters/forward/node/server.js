// A forward server from @fluent-org/logger (FluentServer: handshake, acks), for our sink to deliver into.
// Usage: node server.js SPEC.json — SPEC: {security?: {serverHostname, sharedKey, authorize, userDict}, tlsCert?, tlsKey?}
// Prints {"port": N}, then one JSON line per entry: {"tag", "time": {"int": n} | {"eventTime": [s, ns]}, "record"}
// (bin values as {"$bin": base64}). Stops when stdin closes.
"use strict";
const fs = require("fs");
const { FluentServer, EventTime } = require("@fluent-org/logger");

const spec = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));

function value(v) {
  if (v instanceof Uint8Array) return { $bin: Buffer.from(v).toString("base64") };
  if (Array.isArray(v)) return v.map(value);
  if (v && typeof v === "object") {
    const out = {};
    for (const [k, x] of Object.entries(v)) out[k] = value(x);
    return out;
  }
  return v;
}

async function main() {
  const options = { listenOptions: { host: "127.0.0.1", port: 0 } };
  if (spec.security) options.security = spec.security;
  if (spec.tlsCert) options.tlsOptions = { cert: fs.readFileSync(spec.tlsCert), key: fs.readFileSync(spec.tlsKey) };
  const server = new FluentServer(options);
  server.on("entry", (tag, time, record) => {
    const t = time instanceof EventTime ? { eventTime: [time.epoch, time.nano] } : { int: time };
    process.stdout.write(JSON.stringify({ tag, time: t, record: value(record) }) + "\n");
  });
  await server.listen();
  process.stdout.write(JSON.stringify({ port: server.port }) + "\n");
  process.stdin.on("end", async () => {
    await server.close();
    process.exit(0);
  });
  process.stdin.resume();
}

main();
