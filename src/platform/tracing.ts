// OpenTelemetry tracing as modules use it: through the API only (the SDK, the exporter and the
// provider are the server's, `server/tracing.ts`, and registered only when an OTLP endpoint is
// configured). Whether tracing is on is decided once, before the modules start: with it off, no
// hook, observer or decorator is installed, and what remains on a hot path (an event's
// traceparent) is one boolean test.
import {
  context,
  propagation,
  trace,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  type Attributes,
  type Context,
  type Span,
  type Tracer,
} from "@opentelemetry/api";
import { Code, ConnectError } from "@connectrpc/connect";
import type { Kysely } from "kysely";
import { VERSION } from "../core/version.js";
import { observeQueries } from "../storage/observed.js";

export { SpanKind, type Attributes, type Span };

let enabled = false;

/** Whether this process exports traces (a provider is registered: `server/tracing.ts`). */
export function tracingEnabled(): boolean {
  return enabled;
}

/** Set by the server as it registers and shuts down the provider; nothing else calls it. */
export function setTracingEnabled(on: boolean): void {
  enabled = on;
}

let cachedTracer: Tracer | undefined;
/** The tracer every span of ours is made with (the global provider's, while it is registered). */
export function tracer(): Tracer {
  return (cachedTracer ??= trace.getTracer("bulwark", VERSION));
}

/** Forgets the tracer (the provider it came from was shut down). */
export function forgetTracer(): void {
  cachedTracer = undefined;
}

/** Whether a span of ours is active here: work outside any traced request is not traced. */
export function inTrace(): boolean {
  return trace.getSpan(context.active())?.spanContext() !== undefined;
}

/**
 * Marks a span failed with the error's kind only: messages can repeat what a caller sent (a token
 * in a header, a secret in a field), so they never go into a span.
 */
/** `err` may be an error or the kind itself (`"404"`, `"no answer"`). */
export function failSpan(span: Span, err: unknown): void {
  const type =
    typeof err === "string"
      ? err
      : err instanceof ConnectError
        ? Code[err.code]
        : err && typeof err === "object" && "code" in err && typeof err.code !== "undefined"
          ? String(err.code)
          : err instanceof Error
            ? err.name
            : "error";
  span.setAttribute("error.type", type);
  span.setStatus({ code: SpanStatusCode.ERROR });
}

/** Runs `fn` in a new span, a child of the active one; the span ends when `fn` settles. */
export async function inSpan<T>(
  name: string,
  options: { kind?: SpanKind; attributes?: Attributes },
  fn: (span: Span) => Promise<T>,
): Promise<T> {
  const span = tracer().startSpan(name, options);
  try {
    return await context.with(trace.setSpan(context.active(), span), () => fn(span));
  } catch (err) {
    failSpan(span, err);
    throw err;
  } finally {
    span.end();
  }
}

/** The W3C `traceparent` of the active span, when there is one. */
export function activeTraceparent(): string | undefined {
  if (!inTrace()) return undefined;
  const carrier: Record<string, string> = {};
  propagation.inject(context.active(), carrier);
  return carrier.traceparent;
}

/** The context a W3C `traceparent` (and `tracestate`) names, as the parent of a new span. */
export function contextOfTraceparent(traceparent: string, tracestate?: string): Context {
  return propagation.extract(ROOT_CONTEXT, tracestate ? { traceparent, tracestate } : { traceparent });
}

/** The `traceparent` header that continues the trace in `span`. */
export function traceparentOfSpan(span: Span): string | undefined {
  const carrier: Record<string, string> = {};
  propagation.inject(trace.setSpan(ROOT_CONTEXT, span), carrier);
  return carrier.traceparent;
}

/** The operation a statement performs: its first keyword (`SELECT`, `INSERT`, `BEGIN`, …). */
export function operationOf(sql: string): string {
  return /^\s*([A-Za-z]+)/.exec(sql)?.[1]?.toUpperCase() ?? "QUERY";
}

/**
 * A CLIENT span for every statement `db` sends within a traced request: its SQL text (Kysely's,
 * with `$1` placeholders: parameter values never reach an observer) and its operation. Returns
 * the observer's removal.
 */
export function traceQueries(db: Kysely<any>): () => void {
  return observeQueries(db, (sql) => {
    if (!inTrace()) return;
    const operation = operationOf(sql);
    const span = tracer().startSpan(operation, {
      kind: SpanKind.CLIENT,
      attributes: { "db.system.name": "postgresql", "db.operation.name": operation, "db.query.text": sql },
    });
    return (error) => {
      if (error !== undefined) failSpan(span, error);
      span.end();
    };
  });
}
