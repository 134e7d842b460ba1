// The one-port server's HTTP/1.1 side never listens itself (its front does), so Node's connection
// tracking — what closeIdleConnections and the headers timeout rely on — must be switched on for it.
// Without it, a shutdown waited for each idle keep-alive connection's own timer, and a request
// whose head stopped arriving held its connection forever.
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import { once } from "node:events";
import { createDualServer, type DualServer } from "../../src/server/dual-server.js";
import { clientError, clientErrorAnswer, shapeOfReceived } from "../../src/server/protocol-errors.js";
import { until, withinHang } from "../support/wait.js";

let dual: DualServer | undefined;

afterEach(async () => {
  if (!dual) return;
  dual.destroyConnections();
  await new Promise((resolve) => dual!.front.close(resolve));
  dual = undefined;
});

/** A dual server answering every request 200 "ok", with `tune` applied to its HTTP/1.1 side before it listens. */
async function listening(tune: (h1: DualServer["h1"]) => void): Promise<number> {
  dual = createDualServer((_req, res) => res.end("ok"), {
    clientError: (problem, received) => clientErrorAnswer(clientError(problem), shapeOfReceived(received)),
  });
  tune(dual.h1);
  dual.front.listen(0, "127.0.0.1");
  await once(dual.front, "listening");
  return (dual.front.address() as net.AddressInfo).port;
}

/** A raw connection and everything it has read so far. */
async function connect(port: number): Promise<{ socket: net.Socket; read: () => string }> {
  const socket = net.connect(port, "127.0.0.1");
  await once(socket, "connect");
  let text = "";
  socket.setEncoding("latin1").on("data", (c: string) => (text += c));
  return { socket, read: () => text };
}

describe("the one-port server's HTTP/1.1 connections", () => {
  it("an idle keep-alive connection is ended as soon as the connections are closed", async () => {
    // No keep-alive timer at all: only closeConnections can end the connection.
    const port = await listening((h1) => (h1.keepAliveTimeout = 0));
    const { socket, read } = await connect(port);
    socket.write("GET /a HTTP/1.1\r\nHost: x\r\n\r\n");
    await until(() => read().endsWith("ok"), "the answer");
    assert.match(read(), /^HTTP\/1\.1 200 /);
    assert.doesNotMatch(read(), /connection: close/i, "kept alive");
    const closed = once(socket, "close");
    dual!.closeConnections();
    await withinHang(closed, "the idle connection's end");
  });

  it("a request whose head stops arriving is answered 400 (AIP-193) and its connection closed", async () => {
    const port = await listening((h1) => {
      h1.headersTimeout = 200;
      // createServer's option, read when the tracking starts (@types/node has no property for it)
      (h1 as unknown as { connectionsCheckingInterval: number }).connectionsCheckingInterval = 50;
    });
    const { socket, read } = await connect(port);
    const closed = once(socket, "close");
    socket.write("GET /a HTTP/1.1\r\nHost: x\r\n");
    await withinHang(closed, "the answer to a head that stopped arriving");
    const [head, body] = read().split("\r\n\r\n");
    assert.match(head!, /^HTTP\/1\.1 400 /);
    assert.match(head!, /connection: close/i);
    const status = JSON.parse(body!);
    assert.equal(status.code, 3, body);
    assert.match(status.message, /headers did not all arrive/);
  });
});
