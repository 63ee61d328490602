// Drives a forward server with @fluent-org/logger's FluentClient (an implementation nobody here wrote).
// Usage: node client.js SPEC.json — SPEC: {port, mode, ack, security?, tlsCa?, tagPrefix?, repeat?, events: [[label, time, record]]}
// time: {"int": seconds} | {"eventTime": [seconds, nanoseconds]}; a record value {"$bin": base64} is sent as msgpack bin.
// Prints one JSON line {"emitted": n} and exits 0 once every emit promise resolved (acked when ack is on).
"use strict";
const fs = require("fs");
const { FluentClient, EventTime } = require("@fluent-org/logger");

const spec = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));

function value(v) {
  if (v && typeof v === "object" && !Array.isArray(v)) {
    if (typeof v.$bin === "string") return Buffer.from(v.$bin, "base64");
    const out = {};
    for (const [k, x] of Object.entries(v)) out[k] = value(x);
    return out;
  }
  return Array.isArray(v) ? v.map(value) : v;
}

function time(t) {
  if (t.eventTime) return new EventTime(t.eventTime[0], t.eventTime[1]);
  return t.int * 1000; // FluentClient takes milliseconds and sends whole seconds
}

async function main() {
  const socket = { host: "127.0.0.1", port: spec.port, timeout: -1, disableReconnect: false };
  if (spec.tlsCa) socket.tls = { ca: fs.readFileSync(spec.tlsCa), servername: "localhost" };
  const options = {
    eventMode: spec.mode,
    socket,
    flushInterval: spec.flushInterval || 0,
    disconnect: { waitForPending: true, waitForPendingDelay: 30000 },
  };
  if (spec.ack) options.ack = { ackTimeout: spec.ackTimeout || 20000 };
  if (spec.security) options.security = spec.security;
  const client = new FluentClient(spec.tagPrefix || null, options);
  const errors = [];
  client.socketOn("error", (e) => errors.push(String(e && e.name)));
  const promises = [];
  const repeat = spec.repeat || 1;
  for (let r = 0; r < repeat; r++) {
    for (const [label, t, record] of spec.events) {
      promises.push(client.emit(label, value(record), time(t)));
    }
  }
  const results = await Promise.allSettled(promises);
  const failed = results.filter((x) => x.status === "rejected").map((x) => String(x.reason && x.reason.name));
  await client.disconnect();
  process.stdout.write(JSON.stringify({ emitted: results.length - failed.length, failed, socketErrors: errors }) + "\n");
  process.exit(failed.length ? 1 : 0);
}

main().catch((e) => {
  process.stdout.write(JSON.stringify({ crashed: String(e && e.name) }) + "\n");
  process.exit(2);
});
