/**
 * `@support/server`: what every server program shares (orchd, orch-agent, board-node,
 * board-router). See the package README.
 */

export { endStream } from './end-stream.js';
export {
  createMetricsRegistry,
  HTTP_LATENCY_BUCKETS,
  HttpMetrics,
  type MeasuredExchange,
  metricsAnswer,
  UNMATCHED_ROUTE,
} from './http-metrics.js';
export { createLogger, LOG_LEVELS, type Logger, logLevelSchema } from './logger.js';
export {
  clientErrorHandler,
  closeServer,
  createHttpServer,
  type ErrorEnvelope,
  listen,
  listenUrl,
  refuseRequest,
  requestRefusal,
  type UpgradeListener,
} from './malformed-request.js';
export {
  addOptions,
  ConfigError,
  declareOptions,
  defaultText,
  flagValues,
  loadOptions,
  type OptionDeclaration,
  type OptionDeclarations,
  type OptionSources,
  type OptionValues,
  optionLabel,
  type RawOptions,
  type ReportProblem,
} from './options.js';
export { Periodic, type PeriodicOptions } from './periodic.js';
export { createProgram, refuseUnknownCommand } from './program.js';
export {
  currentRequestId,
  newRequestId,
  REQUEST_ID_HEADER,
  REQUEST_ID_PATTERN,
  type RequestIdExchange,
  requestIdFrom,
  requestIdMiddleware,
  withRequestId,
} from './request-id.js';
export { EXIT, exitCodeOf, type MainOptions, runMain } from './run-main.js';
export {
  listenOptions,
  logLevelOption,
  millisecondsSchema,
  onOffSchema,
  portSchema,
  secondsSchema,
} from './schemas.js';
export { runServices, type Service, type Startable, serveUntilAborted, untilAborted } from './service.js';
export { type Sleep, sleep } from './sleep.js';
export { type LongTimer, MAX_TIMER_MS, setLongTimeout } from './timers.js';
