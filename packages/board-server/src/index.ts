export { authorize, type RequestScope } from './auth/authorize.js';
export { mintToken, parseTtl, verifyToken } from './auth/tokens.js';
export { assertBoardId, type BoardAdmin, type BoardInfo, boardAdmin } from './boards/board-admin.js';
export { parseColumnSpec } from './boards/columns.js';
export { type RetentionOptions, sweepRetention } from './changelog/retention.js';
export {
  type BoardNodeConfig,
  ConfigError,
  loadConfig,
  OPTIONS,
  type RawOptions,
} from './config.js';
export { BoardError, boardError } from './errors.js';
export { createLogger, type Logger } from './log.js';
export { type BoardNode, startBoardNode } from './node.js';
export { openStore, type Store } from './store/database.js';
