import { randomBytes } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import type { Server } from 'node:http';
import { join } from 'node:path';
import { getRequestListener } from '@hono/node-server';
import type { ErrorBody } from '@orch/protocol';
import {
  closeServer,
  createHttpServer,
  type Logger,
  listen,
  listenUrl,
  runServices,
  type Service,
  type Startable,
  serveUntilAborted,
} from '@support/server';
import { buildApp } from './api/app.js';
import { openApiDocument } from './api/openapi.js';
import { type AnyRoute, route } from './api/route.js';
import { apiKeyRoutes } from './api/routes/api-keys.js';
import { buildRoutes } from './api/routes/builds.js';
import { environmentRoutes } from './api/routes/environments.js';
import { eventRoutes } from './api/routes/events.js';
import { hostRoutes } from './api/routes/hosts.js';
import { infoRoute, metricsRoute } from './api/routes/metrics.js';
import { sessionRoutes } from './api/routes/session.js';
import { travelRoutes } from './api/routes/travel.js';
import { Authenticator } from './auth/authenticator.js';
import { BrowserSessions } from './auth/browser-sessions.js';
import { CidrAllowlist } from './auth/cidr-allowlist.js';
import { ConnectionGuard } from './auth/connection-guard.js';
import { LoginThrottle } from './auth/login-throttle.js';
import { SessionSigner } from './auth/session-cookie.js';
import { BuildService } from './builds/build-service.js';
import { layerSecretKey } from './builds/layer-key.js';
import type { Config } from './config.js';
import { TokenBox } from './crypto/token-box.js';
import { mountDashboard } from './dashboard/serve.js';
import { Agents } from './environments/agents.js';
import { ConsoleProxy } from './environments/console-proxy.js';
import { EnvironmentService } from './environments/environment-service.js';
import { ExportService } from './environments/export-service.js';
import { LogService } from './environments/log-service.js';
import { MoveService } from './environments/move-service.js';
import { PauseService } from './environments/pause-service.js';
import { Placer } from './environments/placer.js';
import { Reconciler } from './environments/reconciler.js';
import { SnapshotService } from './environments/snapshot-service.js';
import { TravelService } from './environments/travel-service.js';
import { EventHub } from './events/event-hub.js';
import { HealthMonitor } from './hosts/health-monitor.js';
import { HostService } from './hosts/host-service.js';
import { OrchdMetrics } from './metrics.js';
import { ApiKeysRepo } from './store/api-keys-repo.js';
import { BuildsRepo } from './store/builds-repo.js';
import { openStore, type Store } from './store/database.js';
import { EnvironmentsRepo } from './store/environments-repo.js';
import { HostsRepo } from './store/hosts-repo.js';
import { IdempotencyRepo } from './store/idempotency-repo.js';
import { MovesRepo } from './store/moves-repo.js';
import { RevokedSessionsRepo } from './store/revoked-sessions-repo.js';
import { SnapshotsRepo } from './store/snapshots-repo.js';
import { ORCHD_VERSION } from './version.js';

const KEY_CHECK_SETTING = 'token_encryption_key_check';
const KEY_CHECK_PLAINTEXT = 'orchd token encryption key check';

/** The envelope of requests too malformed for any route (parser refusals, bad Host, `OPTIONS *`). */
const malformed = (message: string): ErrorBody => ({ error: { code: 'invalid_argument', message } });

/**
 * The orchestrator process as a service: store, HTTP API, host health monitor and reconciler,
 * started by `run(signal)` and taken down in reverse order when the signal aborts.
 */
export class Orchestrator implements Service, Startable {
  readonly name = 'orchd';
  private store: Store | undefined;
  private server: Server | undefined;
  private readonly loopsLife = new AbortController();
  private loops: Promise<void> | undefined;
  private envs: EnvironmentService | undefined;
  private moves: MoveService | undefined;
  private consoles: ConsoleProxy | undefined;

  constructor(
    private readonly config: Config,
    private readonly logger: Logger,
    private readonly onListening: (url: string) => void = () => undefined,
  ) {}

  /**
   * Starts everything, calls `onListening` once requests are served, runs until `signal` aborts,
   * then stops. Rejects (after undoing what had started) when it cannot start.
   */
  run(signal: AbortSignal): Promise<void> {
    return serveUntilAborted(signal, this, this.onListening);
  }

  /** Starts everything; resolves with the URL it serves once requests are served. */
  async start(): Promise<string> {
    const { config, logger } = this;
    const allowlist = new CidrAllowlist(config.allowedCidrs);
    this.store = await openStore(config, logger);
    const encryptionKey = await this.encryptionKey();
    const box = new TokenBox(encryptionKey);
    await checkEncryptionKey(this.store, box);

    const apiKeys = this.store.keyStore ? new ApiKeysRepo(this.store.db) : undefined;
    const sessions = config.authToken
      ? new BrowserSessions(new SessionSigner(config.authToken), new RevokedSessionsRepo(this.store.db))
      : undefined;
    const auth = new Authenticator(config.authToken, apiKeys, sessions);
    // Long-lived connections end with the session or key that opened them (README, "Open connections").
    const guard = new ConnectionGuard(
      { ...(sessions ? { sessions } : {}), ...(apiKeys ? { apiKeys } : {}) },
      config.streamRecheckSec * 1000,
      logger,
    );
    const loginThrottle = new LoginThrottle({
      maxFailures: config.loginMaxFailures,
      maxGlobalFailures: config.loginMaxFailuresAll,
      windowMs: config.loginWindowSec * 1000,
    });
    const hostsRepo = new HostsRepo(this.store.db);
    const envRepo = new EnvironmentsRepo(this.store.db);
    const hosts = new HostService(hostsRepo, box, config.microvmAgentToken, logger, envRepo);
    const events = new EventHub(this.store.db, this.store.connectionString, logger);
    const metrics = new OrchdMetrics();
    metrics.watchStore(this.store.db, logger);
    const agents = new Agents(hostsRepo, hosts, config.agentTimeoutSec * 1000, metrics);
    const idempotencyRetentionMs = config.idempotencyRetentionHours * 3_600_000;
    const keys = new IdempotencyRepo(this.store.db);
    // Creates wait for placement in this queue, holding no database connection (README, "Placement").
    const placer = new Placer(
      new EnvironmentsRepo(this.store.placementDb),
      new HostsRepo(this.store.placementDb),
      new IdempotencyRepo(this.store.placementDb),
      {
        queueMax: config.placementQueueMax,
        batchMax: config.placementBatchMax,
        idempotencyRetentionMs,
      },
      logger,
      metrics,
    );
    const envs = new EnvironmentService(
      envRepo,
      hosts,
      agents,
      box,
      placer,
      keys,
      { createMs: config.createTimeoutSec * 1000, pollMs: 250, idempotencyRetentionMs },
      logger,
      metrics,
    );
    this.envs = envs;
    const pauses = new PauseService(envRepo, envs, logger);
    const snapshotsRepo = new SnapshotsRepo(this.store.db);
    const snapshots = new SnapshotService(snapshotsRepo, envs, logger, metrics);
    // Snapshots travel (issue 17): cross-host restores and seeds, exports, host drain.
    const travel = new TravelService(snapshotsRepo, agents, logger);
    envs.travel = travel;
    const exportsService = new ExportService(snapshotsRepo, travel, logger);
    snapshots.exports = exportsService;
    const moves = new MoveService(
      new MovesRepo(this.store.db),
      envRepo,
      envs,
      hosts,
      travel,
      config.createTimeoutSec * 1000,
      logger,
    );
    this.moves = moves;
    const builds = new BuildService(
      new BuildsRepo(this.store.db),
      snapshotsRepo,
      envs,
      hosts,
      layerSecretKey(encryptionKey),
      { layerRetentionMs: config.layerRetentionDays * 86_400_000, heartbeatMs: 30_000, pollMs: 250 },
      logger,
      metrics,
    );
    const consoles = new ConsoleProxy(allowlist, auth, envs, hostsRepo, hosts, guard, logger);
    this.consoles = consoles;

    const routes: AnyRoute[] = [
      ...sessionRoutes(auth, sessions, loginThrottle, config.secureCookies, guard),
      ...hostRoutes(hosts, moves),
      ...apiKeyRoutes(apiKeys, guard),
      ...environmentRoutes(envs, pauses, snapshots, snapshotsRepo, new LogService(envs, agents), guard),
      ...travelRoutes(snapshots, exportsService, moves),
      ...buildRoutes(builds),
      ...eventRoutes(events, guard, config.eventsHeartbeatSec * 1000),
    ];
    const openapi = route({
      method: 'GET',
      path: '/v1/openapi.json',
      access: 'public',
      tag: 'meta',
      summary: 'This document',
      success: { status: 200, description: 'OpenAPI 3.0 description of every route' },
      handler: async () => ({ status: 200, body: document }),
    });
    routes.push(openapi, infoRoute(), metricsRoute(metrics));
    const document = openApiDocument(routes);
    const app = buildApp({ auth, allowlist, logger, http: metrics.http }, routes, (a) =>
      mountDashboard(a, auth, apiKeys !== undefined, new URL('./dashboard/', import.meta.url)),
    );

    const monitor = new HealthMonitor(hostsRepo, hosts, config.hostHealthIntervalSec * 1000, logger);
    const reconciler = new Reconciler(
      envs,
      pauses,
      snapshots,
      envRepo,
      hostsRepo,
      config.reconcileIntervalSec * 1000,
      config.createTimeoutSec * 1000,
      logger,
      metrics,
      { moves, exports: exportsService },
      { repo: keys, retentionMs: idempotencyRetentionMs },
    );
    this.loops = runServices(this.loopsLife.signal, [monitor, reconciler, events, builds, guard]);

    this.server = createHttpServer(getRequestListener(app.fetch, { hostname: config.host }), {
      envelope: malformed,
      upgrade: (req, socket, head) => void consoles.handleUpgrade(req, socket, head),
    });
    const port = await listen(this.server, config.port, config.host);
    if (auth.passThrough && !['127.0.0.1', '::1', 'localhost'].includes(config.host)) {
      logger.warn(
        { host: config.host },
        'authentication is disabled (no master token, no key store) on a non-loopback address',
      );
    }
    logger.info(
      {
        port,
        host: config.host,
        store: this.store.mode,
        auth: auth.passThrough ? 'disabled' : 'required',
        api_keys: !!apiKeys,
        version: ORCHD_VERSION,
      },
      'orchd listening',
    );
    return listenUrl(config.host, port);
  }

  /** Stops what started (also after a partial start). */
  async stop(): Promise<void> {
    this.logger.info('orchd stopping');
    this.loopsLife.abort();
    await this.loops;
    await this.moves?.stop();
    await this.envs?.stop();
    this.consoles?.close();
    if (this.server) await closeServer(this.server);
    await this.store?.close();
  }

  /**
   * The key sealing agent tokens: `TOKEN_ENCRYPTION_KEY`, or (embedded store only) one generated on
   * first start and kept in the data dir with mode 0600.
   */
  private async encryptionKey(): Promise<Buffer> {
    if (this.config.tokenEncryptionKey) return this.config.tokenEncryptionKey;
    const file = join(this.config.dataDir, 'token-encryption.key');
    const existing = await readFile(file, 'utf8').catch(() => undefined);
    if (existing) return Buffer.from(existing.trim(), 'base64');
    const key = randomBytes(32);
    await mkdir(this.config.dataDir, { recursive: true, mode: 0o700 });
    await writeFile(file, `${key.toString('base64')}\n`, { mode: 0o600, flag: 'wx' });
    return key;
  }
}

/** Refuses to start with a key other than the one the database's secrets were sealed with. */
async function checkEncryptionKey(store: Store, box: TokenBox): Promise<void> {
  await store.db
    .insertInto('settings')
    .values({ key: KEY_CHECK_SETTING, value: box.seal(KEY_CHECK_PLAINTEXT) })
    .onConflict((oc) => oc.column('key').doNothing())
    .execute();
  const row = await store.db
    .selectFrom('settings')
    .select('value')
    .where('key', '=', KEY_CHECK_SETTING)
    .executeTakeFirstOrThrow();
  let ok = false;
  try {
    ok = box.open(row.value) === KEY_CHECK_PLAINTEXT;
  } catch {
    ok = false;
  }
  if (!ok) {
    await store.close();
    throw new Error(
      'TOKEN_ENCRYPTION_KEY is not the key this database was set up with; agent tokens could not be decrypted',
    );
  }
}
