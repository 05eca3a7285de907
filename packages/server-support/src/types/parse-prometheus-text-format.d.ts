declare module 'parse-prometheus-text-format' {
  /** One sample (counter, gauge, untyped) or one histogram/summary series as the parser gives it. */
  export interface ParsedSample {
    value?: string;
    labels?: Record<string, string>;
    buckets?: Record<string, string>;
    quantiles?: Record<string, string>;
    count?: string;
    sum?: string;
  }
  /** One metric family. */
  export interface ParsedFamily {
    name: string;
    help: string;
    type: 'COUNTER' | 'GAUGE' | 'HISTOGRAM' | 'SUMMARY' | 'UNTYPED';
    metrics: ParsedSample[];
  }
  /** Parses the Prometheus text exposition format (throws on malformed input). */
  export default function parsePrometheusTextFormat(text: string): ParsedFamily[];
}
