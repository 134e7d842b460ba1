// An OTLP/HTTP trace receiver for tests: a node:http server taking POST /v1/traces with an
// ExportTraceServiceRequest in JSON (what @opentelemetry/exporter-trace-otlp-http sends), keeping
// every span with its resource's attributes flattened into plain values.
import http from "node:http";
import type { AddressInfo } from "node:net";

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  /** "" for a root span */
  parentSpanId: string;
  name: string;
  /** OTLP's SpanKind: 1 internal, 2 server, 3 client */
  kind: number;
  attributes: Record<string, unknown>;
  status: { code?: number };
  resource: Record<string, unknown>;
}

export const SPAN_KIND = { internal: 1, server: 2, client: 3 } as const;

export interface OtlpReceiver {
  /** the traces URL (…/v1/traces) */
  url: string;
  /** the base URL, as OTEL_EXPORTER_OTLP_ENDPOINT takes it */
  endpoint: string;
  spans: ReceivedSpan[];
  /** how many export requests arrived */
  requests: number;
  close(): Promise<void>;
}

interface AnyValue {
  stringValue?: string;
  intValue?: number | string;
  doubleValue?: number;
  boolValue?: boolean;
  arrayValue?: { values?: AnyValue[] };
}
interface KeyValue {
  key: string;
  value: AnyValue;
}

function valueOf(v: AnyValue): unknown {
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.arrayValue) return (v.arrayValue.values ?? []).map(valueOf);
  return undefined;
}

function flatten(attributes: KeyValue[] | undefined): Record<string, unknown> {
  return Object.fromEntries((attributes ?? []).map((a) => [a.key, valueOf(a.value)]));
}

/** Ids arrive as hex in OTLP/JSON; base64 (protobuf's JSON mapping) is read too. */
function hexId(id: string | undefined): string {
  if (!id) return "";
  return /^[0-9a-f]+$/i.test(id) ? id.toLowerCase() : Buffer.from(id, "base64").toString("hex");
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const receiver: OtlpReceiver = {
    url: "",
    endpoint: "",
    spans: [],
    requests: 0,
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      receiver.requests++;
      if (req.method !== "POST" || req.url !== "/v1/traces") {
        res.writeHead(404).end();
        return;
      }
      try {
        const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as {
          resourceSpans?: {
            resource?: { attributes?: KeyValue[] };
            scopeSpans?: { spans?: any[] }[];
          }[];
        };
        for (const rs of body.resourceSpans ?? []) {
          const resource = flatten(rs.resource?.attributes);
          for (const ss of rs.scopeSpans ?? [])
            for (const s of ss.spans ?? [])
              receiver.spans.push({
                traceId: hexId(s.traceId),
                spanId: hexId(s.spanId),
                parentSpanId: hexId(s.parentSpanId),
                name: s.name,
                kind: s.kind,
                attributes: flatten(s.attributes),
                status: s.status ?? {},
                resource,
              });
        }
        res.writeHead(200, { "content-type": "application/json" }).end("{}");
      } catch {
        res.writeHead(400).end();
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  receiver.endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  receiver.url = `${receiver.endpoint}/v1/traces`;
  return receiver;
}

/** Whether `span` descends from the span `ancestorId` (through spans received). */
export function descendsFrom(spans: ReceivedSpan[], span: ReceivedSpan, ancestorId: string): boolean {
  const byId = new Map(spans.map((s) => [s.spanId, s]));
  let at: ReceivedSpan | undefined = span;
  for (let hops = 0; at && hops < 64; hops++) {
    if (at.parentSpanId === ancestorId) return true;
    at = byId.get(at.parentSpanId);
  }
  return false;
}
