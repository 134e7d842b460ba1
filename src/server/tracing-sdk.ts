// The OpenTelemetry SDK, loaded only when traces are exported (server/tracing.ts). Everything
// configurable the standard way is left to the SDK's own reading of the environment: the
// endpoint, headers and timeout (OTEL_EXPORTER_OTLP_*), the sampler (OTEL_TRACES_SAMPLER, _ARG),
// the batching (OTEL_BSP_*), the resource (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES; the
// service is "bulwark" unless they say otherwise).
import { context, diag, propagation, trace, type DiagLogger, DiagLogLevel } from "@opentelemetry/api";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { defaultResource, detectResources, envDetector, resourceFromAttributes } from "@opentelemetry/resources";
import { BatchSpanProcessor, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { NodeTracerProvider } from "@opentelemetry/sdk-trace-node";
import type { Logger } from "pino";
import { VERSION } from "../core/version.js";
import { forgetTracer, setTracingEnabled, tracingEnabled } from "../platform/tracing.js";
import type { TracingSettings } from "./tracing.js";

/** The SDK's own complaints (an export that failed, a bad variable), as warnings in our log. */
function diagnostics(logger: Logger): DiagLogger {
  const warn = (message: string, ...args: unknown[]) =>
    logger.warn({ details: args.map((a) => (a instanceof Error ? a.message : String(a))) }, `tracing: ${message}`);
  const ignore = () => {};
  return { error: warn, warn, info: ignore, debug: ignore, verbose: ignore };
}

export function registerTracing(settings: TracingSettings, logger: Logger): () => Promise<void> {
  if (tracingEnabled())
    throw new Error("tracing is on already in this process: the OpenTelemetry provider is global, one server traces");
  const resource = defaultResource()
    .merge(resourceFromAttributes({ "service.name": "bulwark", "service.version": VERSION }))
    .merge(detectResources({ detectors: [envDetector] }));
  const exporter = new OTLPTraceExporter(settings.url ? { url: settings.url } : {});
  const processor = settings.exportEachSpan ? new SimpleSpanProcessor(exporter) : new BatchSpanProcessor(exporter);
  const provider = new NodeTracerProvider({ resource, spanProcessors: [processor] });
  diag.setLogger(diagnostics(logger), DiagLogLevel.WARN);
  // The global tracer provider, the AsyncLocalStorage context manager and the W3C trace context
  // (and baggage) propagator.
  provider.register();
  setTracingEnabled(true);
  forgetTracer();
  return async () => {
    try {
      await provider.shutdown(); // flushes what is still batched
    } finally {
      setTracingEnabled(false);
      forgetTracer();
      trace.disable();
      context.disable();
      propagation.disable();
      diag.disable();
    }
  };
}
