// Whether and where the server exports traces, and the SDK that does it. The provider is global
// (the OpenTelemetry API is), so one server per process registers it: `bulwark serve` when the
// standard OTEL_EXPORTER_OTLP_ENDPOINT (or _TRACES_ENDPOINT) is set, a test server when it asks.
// The SDK is loaded only then (`tracing-sdk.ts`, a dynamic import): without it a server loads
// the API alone.
import type { Logger } from "pino";

export interface TracingSettings {
  /**
   * The OTLP/HTTP traces URL (e.g. http://collector:4318/v1/traces); default: the SDK's reading
   * of OTEL_EXPORTER_OTLP_TRACES_ENDPOINT / OTEL_EXPORTER_OTLP_ENDPOINT.
   */
  url?: string;
  /** export each span as it ends rather than in batches (tests) */
  exportEachSpan?: boolean;
}

/** Tracing as the standard OpenTelemetry variables ask for it; undefined: off. */
export function tracingFromEnv(env: Readonly<Record<string, string | undefined>>): TracingSettings | undefined {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === "true") return undefined;
  if (env.OTEL_TRACES_EXPORTER?.trim().toLowerCase() === "none") return undefined;
  const endpoint = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim() || env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  return endpoint ? {} : undefined;
}

/** Registers the provider and exporter; the function returned flushes and unregisters them. */
export async function startTracing(settings: TracingSettings, logger: Logger): Promise<() => Promise<void>> {
  const { registerTracing } = await import("./tracing-sdk.js");
  return registerTracing(settings, logger);
}
