/**
 * Wire types and zod schemas of the orchestrator: the `/v1` API (shared by `orchd` and `orch`) and
 * the host-agent protocol (shared by `orchd` and `orch-agent`).
 */
export {
  AGENT_PATHS,
  AgentGpu,
  AgentImage,
  AgentInfo,
  ARCHES,
  type Arch,
  HOST_KINDS,
  type HostKind,
  Resources,
} from './agent.js';
export { checkAgentUrl } from './agent-url.js';
export {
  AGENT_ROUTES,
  AGENT_VM_PATHS,
  AGENT_VM_STATES,
  AgentVm,
  AgentVmList,
  type AgentVmState,
  CreateSnapshotRequest,
  CreateVmRequest,
  DEFAULT_IMAGE,
  EXEC_OUTPUT_LIMIT,
  ExecRequest,
  ExecResult,
  ExposePort,
  MAX_RUNTIME_SECONDS,
  SnapshotArtifact,
  VmSpec,
} from './agent-vms.js';
export { API_KEY_PREFIX, ApiKey, ApiKeyList, CreateApiKeyRequest, CreatedApiKey } from './api-keys.js';
export { BASE64_RULE, base64Problem, decodeBase64 } from './base64.js';
export {
  BUILD_STATES,
  BUILD_STEP_STATES,
  Build,
  BuildIdParam,
  BuildList,
  BuildListQuery,
  type BuildState,
  BuildStep,
  type BuildStepState,
  CreateBuildRequest,
  LAYER_KEY_SCHEME,
  MAX_BUILD_LINES,
} from './builds.js';
export { CLIENT_MARGIN_SECONDS, clientDeadlineMs, execWaitMs, ORCHD_WAIT_SECONDS } from './deadlines.js';
export {
  CreateEnvironmentRequest,
  ENVIRONMENT_STATES,
  Environment,
  EnvironmentAction,
  EnvironmentList,
  EnvironmentListQuery,
  type EnvironmentState,
} from './environments.js';
export {
  ERROR_CODES,
  ERROR_STATUS,
  ErrorBody,
  type ErrorCode,
  type ErrorDetails,
  errorFromBody,
  issuesDetails,
  MAX_DETAIL_ISSUES,
  OrchError,
} from './errors.js';
export { EVENT_ACTIONS, EVENT_KINDS, EVENT_TYPES, type EventKind } from './event-types.js';
export {
  AgentGpuDevice,
  AgentGpuStatus,
  findGpuModel,
  GPU_DETECTION_STATES,
  GPU_MODELS,
  GpuMigInstance,
  GpuMigProfile,
  type GpuModel,
  gpuHealthDetail,
  gpuKey,
  gpuModelOf,
  gpuSupply,
  MIG_MODES,
  MIG_VM_REFUSAL,
  migProfileName,
  migProfilesOffered,
} from './gpu.js';
export {
  HOST_HEALTH,
  HOST_STATES,
  Host,
  HostAction,
  HostCapacityHistory,
  HostCapacityQuery,
  HostCapacitySample,
  HostList,
  RegisterHostRequest,
} from './hosts.js';
export {
  IDEMPOTENCY_KEY_HEADER,
  IDEMPOTENT_REPLAYED_HEADER,
  IdempotencyKey,
  MAX_IDEMPOTENCY_KEY,
} from './idempotency.js';
export { AGENT_ID, ID_RULES, IMAGE_NAME, SERVICE_NAME } from './ids.js';
export { parseJsonBody, protoKeyPath, protoKeyProblem } from './json-body.js';
export {
  AgentLogQuery,
  EnvironmentLogsQuery,
  LOG_OFFSET_HEADER,
  LOG_SIZE_HEADER,
  LOG_WINDOW_BYTES,
  LogWindowQuery,
  logWindow,
} from './logs.js';
export {
  MANIFEST_VERSION,
  Manifest,
  workspacePath,
  workspaceProblem,
} from './manifest.js';
export {
  EnvironmentMove,
  FINAL_MOVE_STATES,
  HostDrain,
  MOVE_STATES,
  MoveList,
  MoveListQuery,
  type MoveState,
} from './moves.js';
export {
  ENV_NAME,
  ENV_NAME_RULE,
  envNameProblem,
  imageNameProblem,
  MAX_EXPOSE,
  MAX_MANIFEST_INLINE,
  MAX_SERVICE_IMAGE,
  MAX_STARTUP_SCRIPT,
  SPEC_LIMITS,
  serviceImageProblem,
  serviceNameProblem,
} from './rules.js';
export {
  decodeManifestInline,
  MAX_SERVICES,
  type ManifestService,
  manifestServices,
  SERVICE_STATES,
  ServiceStatus,
  serviceImageName,
} from './services.js';
export { LoginRequest, SESSION_COOKIE, SESSION_MAX_AGE_SECONDS, SessionState } from './session.js';
export {
  CreateSnapshotBody,
  CreateSnapshotExportBody,
  RestoreSnapshotBody,
  SNAPSHOT_STATES,
  Snapshot,
  SnapshotExport,
  SnapshotList,
  SnapshotListQuery,
  type SnapshotState,
} from './snapshots.js';
export {
  AGENT_ID_RULE,
  agentId,
  base64Text,
  checkIdentifier,
  cleanText,
  HOST_ID,
  HOST_ID_RULE,
  headerToken,
  hostId,
  identifierProblem,
  MAX_TASK_ID,
  SECRET_NAME,
  SECRET_NAME_RULE,
  secretValues,
  taskId,
  text,
  textProblem,
  VM_SECRET_NAME,
} from './text.js';
export {
  ARTIFACT_FILES,
  type ArtifactFile,
  type Destination,
  DestinationCheck,
  destination,
  EXPORT_MANIFEST,
  ExportManifest,
  normalDestination,
  parseDestination,
  SnapshotExportRequest,
  SnapshotExportResult,
  SnapshotFetchRequest,
  TRANSFER_GRANT,
  TRANSFER_GRANT_HEADER,
  TRANSFER_GRANT_MAX_SECONDS,
  TRANSFER_PATHS,
  TRANSFER_ROUTES,
  transferGrantMessage,
} from './transfer.js';
export {
  AGENT_VM_TRANSITIONS,
  allowedSources,
  canTransition,
  ENVIRONMENT_TRANSITIONS,
  SNAPSHOT_TRANSITIONS,
  type TransitionTable,
} from './transitions.js';
