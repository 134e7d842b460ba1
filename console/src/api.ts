// The console's API clients: Connect clients generated from proto/ (src/gen), the same
// descriptors the CLI and the server use, over the Connect protocol (JSON) on the page's own
// origin. Every call carries the session's token; an UNAUTHENTICATED answer ends the session, so
// the console asks for a new sign-in instead of showing a page of failures.
import type { DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { BadRequestSchema } from "../../src/gen/google/rpc/error_details_pb.js";
import { session } from "./session";

const authenticate: Interceptor = (next) => async (request) => {
  const token = session.token();
  if (token) request.header.set("authorization", `Bearer ${token}`);
  try {
    return await next(request);
  } catch (err) {
    if (session.current() && err instanceof ConnectError && err.code === Code.Unauthenticated) {
      session.end("Your session has ended. Sign in again to continue.");
    }
    throw err;
  }
};

const transport = createConnectTransport({ baseUrl: location.origin, interceptors: [authenticate] });
const clients = new Map<DescService, Client<DescService>>();

/** The client of a service (made once). */
export function client<S extends DescService>(service: S): Client<S> {
  let made = clients.get(service);
  if (!made) clients.set(service, (made = createClient(service, transport) as Client<DescService>));
  return made as Client<S>;
}

/** What went wrong, in the server's words: its message and, for bad input, each field's reason. */
export interface Problem {
  message: string;
  code?: Code;
  fields: { field: string; description: string }[];
}

export function problemOf(err: unknown): Problem {
  if (err instanceof ConnectError) {
    const fields = err
      .findDetails(BadRequestSchema)
      .flatMap((d) => d.fieldViolations.map((v) => ({ field: v.field, description: v.description })));
    // Connect's own words when the network, not the server, failed.
    const message = err.code === Code.Unavailable && !err.rawMessage ? "The server cannot be reached." : err.rawMessage;
    return { message, code: err.code, fields };
  }
  return { message: err instanceof Error ? err.message : String(err), fields: [] };
}
