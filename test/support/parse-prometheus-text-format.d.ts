// The types of the Prometheus text parser the metrics suite reads the exposition with (the
// package ships none).
declare module "parse-prometheus-text-format" {
  export interface Sample {
    value?: string;
    labels?: Record<string, string>;
    buckets?: Record<string, string>;
    count?: string;
    sum?: string;
  }
  export interface MetricFamily {
    name: string;
    help: string;
    type: "COUNTER" | "GAUGE" | "HISTOGRAM" | "SUMMARY" | "UNTYPED";
    metrics: Sample[];
  }
  /** Throws on a malformed exposition. */
  export default function parse(text: string): MetricFamily[];
}
