// One cleartext port for HTTP/1.1 and h2c. Fastify's http2 mode without TLS speaks only h2c, so a
// front net.Server peeks at each connection: the HTTP/2 client preface goes to an http2 server,
// anything else to an http/1.1 server; both run Fastify's handler. (Node's http2 allowHTTP1
// fallback exists only for TLS servers, hence the sniffing.)
import http from "node:http";
import http2 from "node:http2";
import net from "node:net";

const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");

export interface DualServer {
  front: net.Server;
  h1: http.Server;
  h2: http2.Http2Server;
  /** end idle keep-alive connections and h2 sessions (GOAWAY) */
  closeConnections(): void;
  /** destroy every connection still open (after a grace period) */
  destroyConnections(): void;
}

export function createDualServer(handler: http.RequestListener): DualServer {
  const h1 = http.createServer({ keepAliveTimeout: 5_000 }, handler);
  const h2 = http2.createServer(
    {},
    handler as unknown as (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => void,
  );
  const sessions = new Set<http2.Http2Session>();
  h2.on("session", (session) => {
    sessions.add(session);
    session.on("close", () => sessions.delete(session));
  });
  const sockets = new Set<net.Socket>();
  const front = net.createServer({ noDelay: true }, (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    let buffered: Buffer = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      buffered = buffered.length ? Buffer.concat([buffered, chunk]) : chunk;
      const n = Math.min(buffered.length, PREFACE.length);
      const isPrefix = buffered.subarray(0, n).equals(PREFACE.subarray(0, n));
      if (isPrefix && buffered.length < PREFACE.length) return; // ambiguous so far: wait for more
      socket.removeListener("data", onData);
      socket.pause();
      socket.unshift(buffered);
      (isPrefix ? h2 : h1).emit("connection", socket);
      process.nextTick(() => socket.resume());
    };
    socket.on("data", onData);
    socket.on("error", () => socket.destroy());
  });
  // Fastify calls listen/close/address on the server it is given: the front.
  return {
    front,
    h1,
    h2,
    closeConnections() {
      h1.closeIdleConnections();
      for (const s of sessions) s.close();
    },
    destroyConnections() {
      for (const s of sockets) s.destroy();
    },
  };
}
